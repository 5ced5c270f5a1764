use std::collections::BTreeMap;
use std::path::Path;

use sarena_common::layouts::{GENERATION, MARK_MAP, MapLayout, PinsMark, pinned_layout};
use sarena_common::v1::COUNTERS_MAP_V1;
use sarena_common::{COUNTERS_MAP, ENDPOINTS_MAP};

use super::*;

fn layout_of(name: &str) -> MapLayout {
    pinned_layout(name).unwrap().layout
}

/// This generation's layouts, as the object would define them.
fn current() -> BTreeMap<String, MapLayout> {
    [ENDPOINTS_MAP, COUNTERS_MAP, MARK_MAP]
        .into_iter()
        .map(|n| (n.to_owned(), layout_of(n)))
        .collect()
}

fn found(pins: &[(&str, Option<MapLayout>)]) -> Vec<(String, Option<MapLayout>)> {
    pins.iter().map(|(n, l)| (n.to_string(), *l)).collect()
}

const DIR: &str = "/sys/fs/bpf/x";

#[test]
fn a_fresh_directory_has_nothing_to_take_over() {
    let inspection = judge(Path::new(DIR), &[], &current(), None).unwrap();
    assert_eq!(inspection, Inspection::default());
}

#[test]
fn generation_1_pins_are_reused_or_retired() {
    let pins = found(&[
        (COUNTERS_MAP_V1, Some(layout_of(COUNTERS_MAP_V1))),
        (ENDPOINTS_MAP, Some(layout_of(ENDPOINTS_MAP))),
    ]);
    let inspection = judge(Path::new(DIR), &pins, &current(), None).unwrap();
    assert_eq!(
        inspection.retired,
        vec![RetiredPin {
            name: COUNTERS_MAP_V1,
            path: Path::new(DIR).join("maps/SARENA_COUNTERS"),
        }]
    );
    assert!(inspection.unknown.is_empty());
}

#[test]
fn a_pin_with_another_layout_than_its_name_fails_naming_both() {
    // What a development build between 86d6440 and generation 2 left: the
    // 224-byte counters under generation 1's name.
    let dev = layout_of(COUNTERS_MAP);
    let pins = found(&[(COUNTERS_MAP_V1, Some(dev))]);
    let err = judge(Path::new(DIR), &pins, &current(), None).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("/sys/fs/bpf/x/maps/SARENA_COUNTERS:"),
        "{text}"
    );
    assert!(text.contains("224-byte values"), "{text}");
    assert!(
        text.contains("an earlier release pinned that name as"),
        "{text}"
    );
    assert!(text.contains("80-byte values"), "{text}");
    assert!(text.contains("nothing was changed"), "{text}");

    let mut wrong = layout_of(ENDPOINTS_MAP);
    wrong.max_entries = 1;
    let pins = found(&[(ENDPOINTS_MAP, Some(wrong))]);
    let text = judge(Path::new(DIR), &pins, &current(), None)
        .unwrap_err()
        .to_string();
    assert!(text.contains("this release pins that name as"), "{text}");
}

#[test]
fn every_conflict_is_reported_at_once() {
    let mut wrong = layout_of(ENDPOINTS_MAP);
    wrong.flags = 1;
    let pins = found(&[
        (COUNTERS_MAP_V1, Some(layout_of(COUNTERS_MAP))),
        (ENDPOINTS_MAP, Some(wrong)),
    ]);
    let text = judge(Path::new(DIR), &pins, &current(), None)
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("SARENA_COUNTERS:") && text.contains("SARENA_ENDPOINTS:"),
        "{text}"
    );
}

#[test]
fn a_newer_release_s_own_maps_are_left_alone() {
    let pins = found(&[
        ("SARENA_SOMETHING_V1", None),
        (ENDPOINTS_MAP, Some(layout_of(ENDPOINTS_MAP))),
    ]);
    let inspection = judge(Path::new(DIR), &pins, &current(), None).unwrap();
    assert_eq!(inspection.unknown, vec!["SARENA_SOMETHING_V1".to_string()]);
    assert!(inspection.retired.is_empty());
}

#[test]
fn a_mark_that_excludes_this_generation_fails_first() {
    let mark = PinsMark {
        generation: GENERATION + 1,
        oldest_reader: GENERATION + 1,
    };
    // Even with a pin that would conflict: the mark is the reason.
    let pins = found(&[(COUNTERS_MAP_V1, Some(layout_of(COUNTERS_MAP)))]);
    let err = judge(Path::new(DIR), &pins, &current(), Some(mark)).unwrap_err();
    assert!(
        matches!(err, BpfError::PinsTooNew { generation, oldest_reader, .. }
        if generation == GENERATION + 1 && oldest_reader == GENERATION + 1)
    );
    let text = err.to_string();
    assert!(
        text.contains(&format!("only generation {} or later", GENERATION + 1))
            && text.contains(&format!("this daemon is generation {GENERATION}"))
            && text.contains("Nothing was changed"),
        "{text}"
    );
}

#[test]
fn a_newer_generation_that_allows_this_one_is_opened() {
    let mark = PinsMark {
        generation: GENERATION + 1,
        oldest_reader: GENERATION,
    };
    let inspection = judge(Path::new(DIR), &[], &current(), Some(mark)).unwrap();
    assert_eq!(inspection.mark, Some(mark));
}
