//! The orchestrator over a mocked [`NodeTeardown`]: order, dry run, the
//! failures that stop or skip steps.

use mockall::Sequence;
use mockall::predicate::eq;

use super::*;

fn failure() -> StepError {
    StepError::Call {
        call: "test",
        source: "boom".into(),
    }
}

/// A teardown expecting every step of `steps`, in that order, with
/// `dry_run`, each answering what `answer` says.
fn in_order(
    steps: &[Step],
    dry_run: bool,
    answer: impl Fn(Step) -> Result<Vec<Line>, StepError> + Send + Sync + Clone + 'static,
) -> MockNodeTeardown {
    let mut teardown = MockNodeTeardown::new();
    let mut seq = Sequence::new();
    for step in steps {
        let answer = answer.clone();
        teardown
            .expect_run()
            .with(eq(*step), eq(dry_run))
            .times(1)
            .in_sequence(&mut seq)
            .returning(move |s, _| answer(s));
    }
    teardown
}

fn all_but(skipped: &[Step]) -> Vec<Step> {
    Step::ALL
        .into_iter()
        .filter(|s| !skipped.contains(s))
        .collect()
}

fn one_removed(step: Step) -> Result<Vec<Line>, StepError> {
    Ok(vec![Line::removed(format!("thing of {step}"), false)])
}

#[tokio::test]
async fn every_step_runs_once_in_order_and_the_summary_counts_them() {
    let teardown = in_order(&Step::ALL, false, one_removed);
    let report = uninstall(&teardown, UninstallOptions::default()).await;
    let steps: Vec<Step> = report.lines.iter().map(|(s, _)| *s).collect();
    assert_eq!(steps, Step::ALL);
    assert!(report.clean());
    assert_eq!(
        report.summary_json(),
        r#"{"removed":14,"left":0,"failed":0,"clean":true}"#
    );
    assert_eq!(report.text_lines()[0], "removed thing of conflist");
}

#[tokio::test]
async fn a_dry_run_passes_dry_run_to_every_step_and_is_not_clean_with_something_to_remove() {
    let teardown = in_order(&Step::ALL, true, |step| {
        Ok(if step == Step::PodLinks {
            vec![Line::removed("link lxc1", true)]
        } else {
            vec![]
        })
    });
    let report = uninstall(
        &teardown,
        UninstallOptions {
            dry_run: true,
            keep_sysctls: false,
        },
    )
    .await;
    assert_eq!(report.text_lines(), ["would remove link lxc1"]);
    assert!(!report.clean());
    assert_eq!(
        report.summary_json(),
        r#"{"removed":1,"left":0,"failed":0,"clean":false}"#
    );
}

#[tokio::test]
async fn a_conflist_failure_stops_everything() {
    let teardown = in_order(&[Step::Conflist], false, |_| Err(failure()));
    let report = uninstall(&teardown, UninstallOptions::default()).await;
    assert!(report.aborted);
    assert!(!report.clean());
    assert_eq!(report.text_lines(), ["failed conflist: test: boom"]);
}

#[tokio::test]
async fn one_failure_does_not_stop_the_others_but_keeps_the_run_and_state_dirs() {
    let teardown = in_order(
        &all_but(&[Step::RunDir, Step::StateDir]),
        false,
        |step| match step {
            Step::PeerRoutes => Err(failure()),
            _ => Ok(vec![]),
        },
    );
    let report = uninstall(&teardown, UninstallOptions::default()).await;
    assert_eq!(
        report.text_lines(),
        [
            "failed peer routes: test: boom",
            "skipped run dir: kept for a re-run: peer routes did not finish",
            "skipped state dir: kept for a re-run: peer routes did not finish",
        ]
    );
    assert_eq!(
        report.summary_json(),
        r#"{"removed":0,"left":0,"failed":1,"clean":false}"#
    );
}

#[tokio::test]
async fn something_left_keeps_the_run_and_state_dirs() {
    let teardown = in_order(
        &all_but(&[Step::RunDir, Step::StateDir]),
        false,
        |step| match step {
            Step::Clsact => Ok(vec![Line::left("clsact on eth0", "a filter remains")]),
            _ => Ok(vec![]),
        },
    );
    let report = uninstall(&teardown, UninstallOptions::default()).await;
    assert_eq!(report.counts().left, 1);
    assert!(!report.clean());
    assert!(report.failed_or_left(Step::Clsact));
}

#[tokio::test]
async fn a_run_dir_failure_keeps_the_state_dir() {
    let teardown = in_order(&all_but(&[Step::StateDir]), false, |step| match step {
        Step::RunDir => Err(failure()),
        _ => Ok(vec![]),
    });
    let report = uninstall(&teardown, UninstallOptions::default()).await;
    assert_eq!(
        report.text_lines().last().unwrap(),
        "skipped state dir: kept for a re-run: run dir did not finish"
    );
}

/// Whether the pins step is skipped after `hooks` is the network hooks'
/// outcome.
async fn pins_skipped_after(hooks: fn() -> Result<Vec<Line>, StepError>) -> bool {
    let teardown = in_order(
        &all_but(&[Step::Pins, Step::RunDir, Step::StateDir]),
        false,
        move |step| match step {
            Step::NetworkHooks => hooks(),
            _ => Ok(vec![]),
        },
    );
    let report = uninstall(&teardown, UninstallOptions::default()).await;
    report
        .text_lines()
        .iter()
        .any(|l| l.starts_with("skipped pins: the network hooks could not all be removed"))
}

#[tokio::test]
async fn the_pins_stay_when_the_network_hooks_failed() {
    assert!(pins_skipped_after(|| Err(failure())).await);
}

#[tokio::test]
async fn the_pins_stay_when_a_network_hook_was_left() {
    assert!(
        pins_skipped_after(|| Ok(vec![Line::left(
            "filter to_network on eth0 egress",
            "still attached after the detach",
        )]))
        .await
    );
}

#[tokio::test]
async fn keep_sysctls_skips_only_the_sysctls_and_the_node_is_still_clean() {
    let teardown = in_order(&all_but(&[Step::Sysctls]), false, |_| Ok(vec![]));
    let report = uninstall(
        &teardown,
        UninstallOptions {
            dry_run: false,
            keep_sysctls: true,
        },
    )
    .await;
    assert_eq!(report.text_lines(), ["skipped sysctls: --keep-sysctls"]);
    assert!(report.clean());
}

#[tokio::test]
async fn a_second_run_on_a_clean_node_reports_nothing_and_is_clean() {
    for dry_run in [false, true] {
        let teardown = in_order(&Step::ALL, dry_run, |_| Ok(vec![]));
        let options = UninstallOptions {
            dry_run,
            keep_sysctls: false,
        };
        let report = uninstall(&teardown, options).await;
        assert!(report.lines.is_empty());
        assert!(report.clean());
        assert_eq!(
            report.summary_json(),
            r#"{"removed":0,"left":0,"failed":0,"clean":true}"#
        );
    }
}

#[tokio::test]
async fn kept_lines_count_as_neither_left_nor_failed() {
    let teardown = in_order(&Step::ALL, false, |step| {
        Ok(match step {
            Step::RunDir => vec![Line::kept("/run/sarena", "a mount point here (empty)")],
            _ => vec![],
        })
    });
    let report = uninstall(&teardown, UninstallOptions::default()).await;
    assert!(report.clean());
    assert_eq!(
        report.text_lines(),
        ["kept /run/sarena: a mount point here (empty)"]
    );
}

#[test]
fn the_dataplane_lines_are_read_by_their_verb() {
    assert_eq!(
        Line::from_text("removed filter to_network from eth0 egress", false),
        Line::removed("filter to_network from eth0 egress", false)
    );
    assert_eq!(
        Line::from_text("would remove table ip sarena", true).verdict,
        Verdict::WouldRemove
    );
    assert_eq!(
        Line::from_text("left net/ipv4/ip_forward: changed since", false),
        Line::left("net/ipv4/ip_forward", "changed since")
    );
    let restored = Line::from_text("restored sysctl net/ipv4/ip_forward = 0", false);
    assert_eq!(restored.verdict, Verdict::Restored);
    assert_eq!(
        restored.to_string(),
        "restored sysctl net/ipv4/ip_forward = 0"
    );
    assert_eq!(
        Line::from_text("would restore sysctl a = 0", true).verdict,
        Verdict::WouldRestore
    );
    assert_eq!(
        Line::from_text("pin maps/SARENA_X", true).verdict,
        Verdict::WouldRemove
    );
}
