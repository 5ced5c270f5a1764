//! What the uninstall found: [`Line`]s with their [`Verdict`], a step's
//! failure ([`StepError`]), and the [`Report`] of a whole run.

use std::path::PathBuf;

use super::Step;

/// What became of one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It was Sarena's and is gone (or put back, for what Sarena changed).
    Removed,
    /// Dry run: it is Sarena's and would be removed.
    WouldRemove,
    /// It is still there.
    Left {
        /// Why it was not removed.
        why: String,
    },
    /// Kept on purpose, and nothing of Sarena's is left in it (a directory
    /// that is a mount point): counts as neither left nor failed.
    Kept {
        /// Why.
        why: String,
    },
    /// The step failed on it.
    Failed {
        /// The error, with its causes.
        error: String,
    },
    /// The step did not run.
    Skipped {
        /// Why.
        why: String,
    },
}

/// One object a step acted on (or would, in a dry run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// What it is: `link lxc0123456789ab (pod veth)`.
    pub object: String,
    /// What became of it.
    pub verdict: Verdict,
}

impl Line {
    /// `object` removed, or would be in a dry run.
    pub fn removed(object: impl Into<String>, dry_run: bool) -> Line {
        Line {
            object: object.into(),
            verdict: if dry_run {
                Verdict::WouldRemove
            } else {
                Verdict::Removed
            },
        }
    }

    /// `object` left, for `why`.
    pub fn left(object: impl Into<String>, why: impl Into<String>) -> Line {
        Line {
            object: object.into(),
            verdict: Verdict::Left { why: why.into() },
        }
    }

    /// `object` kept on purpose, for `why`.
    pub fn kept(object: impl Into<String>, why: impl Into<String>) -> Line {
        Line {
            object: object.into(),
            verdict: Verdict::Kept { why: why.into() },
        }
    }

    /// A line of the dataplane teardown functions (`removed …`, `would
    /// remove …`, `left …: why`, `restored …`, `kept …: why`) as a
    /// [`Line`]; text without a known verb is an object acted on.
    pub fn from_text(text: &str, dry_run: bool) -> Line {
        let split = |rest: &str| match rest.split_once(": ") {
            Some((object, why)) => (object.to_owned(), why.to_owned()),
            None => (rest.to_owned(), String::new()),
        };
        if let Some(rest) = text.strip_prefix("would remove ") {
            return Line::removed(rest, true);
        }
        if let Some(rest) = text.strip_prefix("would restore ") {
            return Line::removed(format!("{rest} (restored)"), true);
        }
        if let Some(rest) = text.strip_prefix("removed ") {
            return Line::removed(rest, false);
        }
        if let Some(rest) = text.strip_prefix("restored ") {
            return Line::removed(format!("{rest} (restored)"), false);
        }
        if let Some(rest) = text.strip_prefix("left ") {
            let (object, why) = split(rest);
            return Line::left(object, why);
        }
        if let Some(rest) = text.strip_prefix("kept ") {
            let (object, why) = split(rest);
            return Line::kept(object, why);
        }
        Line::removed(text, dry_run)
    }
}

impl std::fmt::Display for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let object = &self.object;
        match &self.verdict {
            Verdict::Removed => write!(f, "removed {object}"),
            Verdict::WouldRemove => write!(f, "would remove {object}"),
            Verdict::Left { why } => write!(f, "left {object}: {why}"),
            Verdict::Kept { why } => write!(f, "kept {object}: {why}"),
            Verdict::Failed { error } => write!(f, "failed {object}: {error}"),
            Verdict::Skipped { why } => write!(f, "skipped {object}: {why}"),
        }
    }
}

/// Why a step failed as a whole.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// The file under Sarena's conflist name is another network's config.
    #[error("{} is not Sarena's ({reason})", .path.display())]
    NotSarenas {
        /// The file.
        path: PathBuf,
        /// Why it is not Sarena's.
        reason: String,
    },
    /// A file-system call failed.
    #[error("{call} {}", .path.display())]
    Io {
        /// The call, e.g. `remove`.
        call: &'static str,
        /// The path it was called on.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// A call into another part of Sarena (netlink, nft, the API server,
    /// the store) failed.
    #[error("{call}")]
    Call {
        /// What was called.
        call: &'static str,
        /// Cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl StepError {
    /// A [`StepError::Call`] of `call` failing with `source`.
    pub fn call(
        call: &'static str,
    ) -> impl FnOnce(Box<dyn std::error::Error + Send + Sync>) -> StepError {
        move |source| StepError::Call { call, source }
    }

    /// A [`StepError::Io`] of `call` on `path`.
    pub fn io(call: &'static str, path: &std::path::Path, source: std::io::Error) -> StepError {
        StepError::Io {
            call,
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Counts of a [`Report`]'s lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Removed (in a dry run: would be removed).
    pub removed: usize,
    /// Left.
    pub left: usize,
    /// Failed.
    pub failed: usize,
}

/// What a run of the uninstall did, step by step.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// A dry run: nothing was changed.
    pub dry_run: bool,
    /// Each line with the step that wrote it, in order.
    pub lines: Vec<(Step, Line)>,
    /// The run stopped early (the conflist could not be removed).
    pub aborted: bool,
}

impl Report {
    /// The counts of its lines.
    pub fn counts(&self) -> Counts {
        let mut counts = Counts::default();
        for (_, line) in &self.lines {
            match line.verdict {
                Verdict::Removed | Verdict::WouldRemove => counts.removed += 1,
                Verdict::Left { .. } => counts.left += 1,
                Verdict::Failed { .. } => counts.failed += 1,
                Verdict::Kept { .. } | Verdict::Skipped { .. } => {}
            }
        }
        counts
    }

    /// Nothing of Sarena's is left on the node: nothing left, nothing
    /// failed, no step cut short, and in a dry run nothing to remove.
    pub fn clean(&self) -> bool {
        let counts = self.counts();
        counts.left == 0
            && counts.failed == 0
            && !self.aborted
            && !(self.dry_run && counts.removed > 0)
    }

    /// Whether a step wrote a failure or left something.
    pub fn failed_or_left(&self, step: Step) -> bool {
        self.lines.iter().any(|(s, line)| {
            *s == step && matches!(line.verdict, Verdict::Failed { .. } | Verdict::Left { .. })
        })
    }

    /// Whether a step failed.
    pub fn failed(&self, step: Step) -> bool {
        self.lines
            .iter()
            .any(|(s, line)| *s == step && matches!(line.verdict, Verdict::Failed { .. }))
    }

    /// The report's text: one line per object (`removed …`, `would remove
    /// …`, `left …: why`, `failed …: error`, …).
    pub fn text_lines(&self) -> Vec<String> {
        self.lines
            .iter()
            .map(|(_, line)| line.to_string())
            .collect()
    }

    /// The last line of the command's output:
    /// `{"removed":N,"left":N,"failed":N,"clean":bool}`.
    pub fn summary_json(&self) -> String {
        let counts = self.counts();
        // Written by hand: the keys in this order (a JSON object from
        // serde_json's map would sort them).
        format!(
            r#"{{"removed":{},"left":{},"failed":{},"clean":{}}}"#,
            counts.removed,
            counts.left,
            counts.failed,
            self.clean()
        )
    }
}
