//! The page's SVG plots, drawn with plotters' SVG backend: grouped latency
//! bars (median) with p90/p99 whiskers, and the empirical CDF of ADD latency.

use std::ops::Range;

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::BenchError;
use crate::cni_ops::CniResults;
use crate::node::Contender;
use crate::stats::{cdf, percentile};

/// Colours of the series, in order (Okabe–Ito, colour-blind-friendly).
pub const COLOURS: [RGBColor; 6] = [
    RGBColor(0x00, 0x72, 0xB2),
    RGBColor(0x56, 0xB4, 0xE9),
    RGBColor(0xE6, 0x9F, 0x00),
    RGBColor(0x00, 0x9E, 0x73),
    RGBColor(0xCC, 0x79, 0xA7),
    RGBColor(0xD5, 0x5E, 0x00),
];

const SIZE: (u32, u32) = (760, 420);
const FONT: &str = "sans-serif";

/// What plotters fails with.
type PlotError = Box<dyn std::error::Error + Send + Sync>;

fn colour(series: usize) -> RGBColor {
    COLOURS[series % COLOURS.len()]
}

/// `#RRGGBB`, as the SVG names a colour.
#[cfg(test)]
pub(crate) fn hex(RGBColor(r, g, b): RGBColor) -> String {
    format!("#{r:02X}{g:02X}{b:02X}")
}

/// A bar's numbers: the bar is `p50`, the whisker runs to `p99` with a tick at `p90`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bar {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
}

type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// One chart on a white SVG canvas: its title and axis ranges, `draw` for the
/// mesh and the series, then the series' legend at `legend`.
fn render(
    title: &str,
    (x, y): (Range<f64>, Range<f64>),
    legend: SeriesLabelPosition,
    draw: impl FnOnce(&mut Chart<'_, '_>) -> Result<(), PlotError>,
) -> Result<String, PlotError> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 15))
            .margin(12)
            .x_label_area_size(48)
            .y_label_area_size(56)
            .build_cartesian_2d(x, y)?;
        draw(&mut chart)?;
        chart
            .configure_series_labels()
            .position(legend)
            .label_font((FONT, 12))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()?;
        root.present()?;
    }
    Ok(out)
}

/// The group name for an x value (groups sit at 0, 1, 2, ...).
fn group_label(groups: &[String], x: f64) -> String {
    let i = x.round();
    if (x - i).abs() > 1e-6 || i < 0.0 {
        return String::new();
    }
    groups.get(i as usize).cloned().unwrap_or_default()
}

/// Grouped bars: one group per entry of `groups`, one bar per series in each;
/// `values[g][s]` is the bar of series `s` in group `g` (absent: no bar).
pub fn bar_chart(
    title: &str,
    y_label: &str,
    groups: &[String],
    series: &[String],
    values: &[Vec<Option<Bar>>],
) -> Result<String, PlotError> {
    let max = values
        .iter()
        .flatten()
        .flatten()
        .map(|b| b.p99.max(b.p50))
        .fold(0.0, f64::max);
    // Headroom above the tallest whisker for its label.
    let top = if max > 0.0 { max * 1.12 } else { 1.0 };
    let width = 0.8 / series.len().max(1) as f64;
    let x = -0.5..groups.len().max(1) as f64 - 0.5;
    render(
        title,
        (x, 0.0..top),
        SeriesLabelPosition::UpperRight,
        |chart| {
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(groups.len())
                .x_label_formatter(&|x| group_label(groups, *x))
                .x_label_style((FONT, 13))
                .x_desc("bar: median; whisker: tick at p90, end at p99; label: median")
                .y_desc(y_label)
                .draw()?;
            for (s, name) in series.iter().enumerate() {
                let c = colour(s);
                let bars: Vec<(f64, Bar)> = values
                    .iter()
                    .enumerate()
                    .filter_map(|(g, row)| {
                        let mid = g as f64 - 0.4 + (s as f64 + 0.5) * width;
                        Some((mid, (*row.get(s)?)?))
                    })
                    .collect();
                let half = width * 0.45;
                chart
                    .draw_series(bars.iter().map(|&(mid, b)| {
                        Rectangle::new([(mid - half, 0.0), (mid + half, b.p50)], c.filled())
                    }))?
                    .label(name.as_str())
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 5), (x + 10, y + 5)], c.filled())
                    });
                chart.draw_series(bars.iter().flat_map(|&(mid, b)| {
                    let (tick, cap) = (width / 5.0, width / 3.0);
                    [
                        PathElement::new(vec![(mid, b.p50), (mid, b.p99)], BLACK),
                        PathElement::new(vec![(mid - tick, b.p90), (mid + tick, b.p90)], BLACK),
                        PathElement::new(vec![(mid - cap, b.p99), (mid + cap, b.p99)], BLACK),
                    ]
                }))?;
                let label = TextStyle::from((FONT, 10)).pos(Pos::new(HPos::Center, VPos::Bottom));
                chart.draw_series(bars.iter().map(|&(mid, b)| {
                    EmptyElement::at((mid, b.p99))
                        + Text::new(format!("{:.1}", b.p50), (0, -3), label.clone())
                }))?;
            }
            Ok(())
        },
    )
}

/// Empirical CDFs, one step line per series of raw samples; the x axis is
/// clipped at the largest p99 so one outlier does not squash the plot.
pub fn cdf_chart(
    title: &str,
    x_label: &str,
    series: &[(String, &[f64])],
) -> Result<String, PlotError> {
    let max = series
        .iter()
        .filter_map(|(_, samples)| percentile(samples, 99.0))
        .fold(0.0, f64::max);
    let right = if max > 0.0 { max * 1.05 } else { 1.0 };
    let axes = (0.0..right, 0.0..1.0);
    render(title, axes, SeriesLabelPosition::LowerRight, |chart| {
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc("fraction of operations")
            .draw()?;
        for (s, (name, samples)) in series.iter().enumerate() {
            let c = colour(s);
            // A step function: across at the previous fraction, then up.
            let mut prev = 0.0;
            let steps: Vec<(f64, f64)> = cdf(samples)
                .into_iter()
                .flat_map(|(v, f)| {
                    let x = v.min(right);
                    let step = [(x, prev), (x, f)];
                    prev = f;
                    step
                })
                .collect();
            chart
                .draw_series(LineSeries::new(steps, c.stroke_width(2)))?
                .label(name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2))
                });
        }
        Ok(())
    })
}

fn plot_error(plot: &'static str) -> impl FnOnce(PlotError) -> BenchError {
    move |source| BenchError::Plot { plot, source }
}

/// The bars of the latency plot: `[op][contender]`.
fn latency_bars(cni: &CniResults, ops: &[&str]) -> Vec<Vec<Option<Bar>>> {
    ops.iter()
        .map(|op| {
            cni.options
                .contenders
                .iter()
                .map(|&c| {
                    let s = cni.latency.row(c, op)?.summary?;
                    Some(Bar {
                        p50: s.p50,
                        p90: s.p90,
                        p99: s.p99,
                    })
                })
                .collect()
        })
        .collect()
}

/// The latency bars (p50 bar, p90/p99 whisker) per op and contender.
pub fn latency_svg(cni: &CniResults) -> Result<String, BenchError> {
    let ops = ["ADD", "CHECK", "DEL", "STATUS"];
    let contenders: &[Contender] = &cni.options.contenders;
    bar_chart(
        &format!(
            "CNI operation latency, {} pods each (plugin exec as a runtime does)",
            cni.latency.pods
        ),
        "milliseconds",
        &ops.map(String::from),
        &contenders
            .iter()
            .map(|c| c.label().to_string())
            .collect::<Vec<_>>(),
        &latency_bars(cni, &ops),
    )
    .map_err(plot_error("latency bars"))
}

/// The CDF of ADD latency per contender.
pub fn add_cdf_svg(cni: &CniResults) -> Result<String, BenchError> {
    let series: Vec<(String, &[f64])> = cni
        .options
        .contenders
        .iter()
        .filter_map(|&c| {
            let row = cni.latency.row(c, "ADD")?;
            Some((c.label().to_string(), row.samples_ms.as_slice()))
        })
        .collect();
    cdf_chart(
        &format!(
            "CNI ADD latency distribution, {} pods each",
            cni.latency.pods
        ),
        "milliseconds (axis clipped at the largest p99)",
        &series,
    )
    .map_err(plot_error("ADD latency CDF"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(series: usize) -> String {
        format!("fill=\"{}\"", hex(colour(series)))
    }

    #[test]
    fn bar_chart_draws_each_bar_names_the_groups_and_escapes_names() {
        let bar = Some(Bar {
            p50: 5.0,
            p90: 7.0,
            p99: 9.0,
        });
        let svg = bar_chart(
            "t",
            "ms",
            &["ADD".into(), "DEL".into()],
            &["a<b".into(), "c".into()],
            &[vec![bar, bar], vec![bar, None]],
        )
        .unwrap();
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.trim_end().ends_with("</svg>"));
        // One filled rect per bar plus one legend swatch per series.
        assert_eq!(svg.matches(&fill(0)).count(), 2 + 1);
        assert_eq!(svg.matches(&fill(1)).count(), 1 + 1);
        assert!(svg.contains("\nADD\n") && svg.contains("\nDEL\n"), "{svg}");
        assert!(svg.contains("a&lt;b"));
        assert!(!svg.contains("a<b"));
    }

    #[test]
    fn cdf_chart_has_one_line_per_series() {
        let (x, y) = ([1.0, 2.0], [3.0]);
        let svg = cdf_chart("t", "ms", &[("x".into(), &x), ("y".into(), &y)]).unwrap();
        // One line per series and its legend line, in the series' colour.
        for s in 0..2 {
            let stroke = format!("stroke=\"{}\"", hex(colour(s)));
            assert_eq!(svg.matches(&stroke).count(), 2, "{svg}");
        }
    }

    #[test]
    fn group_labels_sit_on_whole_numbers() {
        let groups = ["ADD".to_string(), "DEL".to_string()];
        assert_eq!(group_label(&groups, 1.0), "DEL");
        assert_eq!(group_label(&groups, 0.5), "");
        assert_eq!(group_label(&groups, -1.0), "");
        assert_eq!(group_label(&groups, 2.0), "");
    }
}
