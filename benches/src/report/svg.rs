//! Hand-written SVG plots (no plotting dependency): grouped latency bars with
//! p90/p99 whiskers, and empirical CDFs.

use std::fmt::Write;

/// Colours of the series, in order (colour-blind-friendly palette).
const COLOURS: [&str; 6] = [
    "#0072B2", "#56B4E9", "#E69F00", "#009E73", "#CC79A7", "#D55E00",
];

/// A bar's numbers: the bar is `p50`, the whisker runs to `p99` with a tick at `p90`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bar {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
}

/// A "nice" axis step (1, 2 or 5 × 10^k) for about five ticks up to `max`.
pub fn nice_step(max: f64) -> f64 {
    if !(max > 0.0 && max.is_finite()) {
        return 1.0;
    }
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A tick label with as many decimals as the step needs (no float noise).
fn fmt_tick(v: f64, step: f64) -> String {
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10() - 1e-9).ceil() as usize
    };
    format!("{v:.decimals$}")
}

const W: f64 = 760.0;
const H: f64 = 420.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 48.0;
const BOTTOM: f64 = 90.0;

fn header(out: &mut String, title: &str) {
    let _ = write!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{}" y="24" text-anchor="middle" font-size="15" font-weight="bold">{}</text>
"##,
        W / 2.0,
        esc(title)
    );
}

/// Y axis with grid lines from 0 to `top`; returns the y of a value.
fn y_axis(out: &mut String, top: f64, step: f64, label: &str) -> impl Fn(f64) -> f64 + use<> {
    let plot_h = H - TOP - BOTTOM;
    let y = move |v: f64| TOP + plot_h * (1.0 - (v / top).clamp(0.0, 1.0));
    let ticks = (top / step).round() as usize;
    for i in 0..=ticks {
        let t = i as f64 * step;
        let yy = y(t);
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            W - RIGHT,
            LEFT - 6.0,
            yy + 4.0,
            fmt_tick(t, step)
        );
    }
    let _ = writeln!(
        out,
        r##"<text transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"##,
        TOP + plot_h / 2.0,
        esc(label)
    );
    y
}

fn legend(out: &mut String, names: &[String]) {
    let mut x = LEFT;
    let y = H - 22.0;
    for (i, name) in names.iter().enumerate() {
        let c = COLOURS[i % COLOURS.len()];
        let _ = writeln!(
            out,
            r##"<rect x="{x:.1}" y="{:.1}" width="12" height="12" fill="{c}"/><text x="{:.1}" y="{y:.1}">{}</text>"##,
            y - 10.0,
            x + 16.0,
            esc(name)
        );
        x += 26.0 + 7.0 * name.len() as f64;
    }
}

/// Grouped bars: one group per entry of `groups`, one bar per series in each;
/// `values[g][s]` is the bar of series `s` in group `g` (absent: no bar).
pub fn bar_chart(
    title: &str,
    y_label: &str,
    groups: &[String],
    series: &[String],
    values: &[Vec<Option<Bar>>],
) -> String {
    let mut out = String::new();
    header(&mut out, title);
    let max = values
        .iter()
        .flatten()
        .flatten()
        .map(|b| b.p99.max(b.p50))
        .fold(0.0, f64::max);
    let step = nice_step(max);
    let top = (max / step).ceil().max(1.0) * step;
    let y = y_axis(&mut out, top, step, y_label);
    let plot_w = W - LEFT - RIGHT;
    let group_w = plot_w / groups.len().max(1) as f64;
    let bar_w = (group_w * 0.8) / series.len().max(1) as f64;
    for (g, name) in groups.iter().enumerate() {
        let gx = LEFT + g as f64 * group_w + group_w * 0.1;
        for (s, bar) in values.get(g).into_iter().flatten().enumerate() {
            let Some(b) = bar else { continue };
            let c = COLOURS[s % COLOURS.len()];
            let x = gx + s as f64 * bar_w;
            let (y50, y90, y99) = (y(b.p50), y(b.p90), y(b.p99));
            let mid = x + bar_w / 2.0;
            let _ = writeln!(
                out,
                r##"<rect x="{:.1}" y="{y50:.1}" width="{:.1}" height="{:.1}" fill="{c}"><title>{}: p50 {:.2}, p90 {:.2}, p99 {:.2}</title></rect>"##,
                x + 1.0,
                bar_w - 2.0,
                y(0.0) - y50,
                esc(&series[s]),
                b.p50,
                b.p90,
                b.p99
            );
            let _ = writeln!(
                out,
                r##"<line x1="{mid:.1}" y1="{y50:.1}" x2="{mid:.1}" y2="{y99:.1}" stroke="#333"/><line x1="{:.1}" y1="{y90:.1}" x2="{:.1}" y2="{y90:.1}" stroke="#333"/><line x1="{:.1}" y1="{y99:.1}" x2="{:.1}" y2="{y99:.1}" stroke="#333"/>"##,
                mid - bar_w / 5.0,
                mid + bar_w / 5.0,
                mid - bar_w / 3.0,
                mid + bar_w / 3.0
            );
            let _ = writeln!(
                out,
                r##"<text x="{mid:.1}" y="{:.1}" text-anchor="middle" font-size="10">{:.1}</text>"##,
                y99 - 4.0,
                b.p50
            );
        }
        let _ = writeln!(
            out,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-weight="bold">{}</text>"##,
            gx + group_w * 0.4,
            H - BOTTOM + 18.0,
            esc(name)
        );
    }
    let _ = writeln!(
        out,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="11" fill="#555">bar: median; whisker: tick at p90, end at p99; label: median</text>"##,
        W / 2.0,
        H - BOTTOM + 40.0
    );
    legend(&mut out, series);
    out.push_str("</svg>\n");
    out
}

/// Empirical CDFs: one line per series (`points` are (value, fraction) sorted).
pub fn cdf_chart(title: &str, x_label: &str, series: &[(String, Vec<(f64, f64)>)]) -> String {
    let mut out = String::new();
    header(&mut out, title);
    // Clip the x axis at the largest p99 so one outlier does not squash the plot.
    let max = series
        .iter()
        .filter_map(|(_, pts)| {
            let n = pts.len();
            (n > 0).then(|| pts[((n as f64 * 0.99).ceil() as usize).clamp(1, n) - 1].0)
        })
        .fold(0.0, f64::max);
    let step = nice_step(max);
    let right = (max / step).ceil().max(1.0) * step;
    let y = y_axis(&mut out, 1.0, 0.2, "fraction of operations");
    let plot_w = W - LEFT - RIGHT;
    let x = |v: f64| LEFT + plot_w * (v / right).clamp(0.0, 1.0);
    let ticks = (right / step).round() as usize;
    for i in 0..=ticks {
        let t = i as f64 * step;
        let _ = writeln!(
            out,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            x(t),
            H - BOTTOM + 16.0,
            fmt_tick(t, step)
        );
    }
    let _ = writeln!(
        out,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
        LEFT + plot_w / 2.0,
        H - BOTTOM + 36.0,
        esc(x_label)
    );
    for (i, (_, pts)) in series.iter().enumerate() {
        let c = COLOURS[i % COLOURS.len()];
        let mut d = String::new();
        let mut prev_frac = 0.0;
        for (k, &(v, f)) in pts.iter().enumerate() {
            let cmd = if k == 0 { 'M' } else { 'L' };
            // A step function: horizontal to the value at the previous fraction, then up.
            let _ = write!(
                d,
                "{cmd}{:.1},{:.1} L{:.1},{:.1} ",
                x(v),
                y(prev_frac),
                x(v),
                y(f)
            );
            prev_frac = f;
        }
        let _ = writeln!(
            out,
            r##"<path d="{}" fill="none" stroke="{c}" stroke-width="2"/>"##,
            d.trim_end()
        );
    }
    let names: Vec<String> = series.iter().map(|(n, _)| n.clone()).collect();
    legend(&mut out, &names);
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_labels_have_no_float_noise() {
        assert_eq!(fmt_tick(3.0 * 0.2, 0.2), "0.6");
        assert_eq!(fmt_tick(40.0, 10.0), "40");
        assert_eq!(fmt_tick(0.15, 0.05), "0.15");
    }

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(10.0), 2.0);
        assert_eq!(nice_step(43.0), 10.0);
        assert_eq!(nice_step(0.9), 0.2);
        assert_eq!(nice_step(0.0), 1.0);
        assert_eq!(nice_step(f64::NAN), 1.0);
    }

    #[test]
    fn bar_chart_draws_each_bar_and_escapes_names() {
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
        );
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<title>").count(), 3);
        assert!(svg.contains("a&lt;b"));
        assert!(!svg.contains("a<b"));
    }

    #[test]
    fn cdf_chart_has_one_path_per_series() {
        let s = vec![
            ("x".to_string(), vec![(1.0, 0.5), (2.0, 1.0)]),
            ("y".to_string(), vec![(3.0, 1.0)]),
        ];
        let svg = cdf_chart("t", "ms", &s);
        assert_eq!(svg.matches("<path").count(), 2);
    }
}
