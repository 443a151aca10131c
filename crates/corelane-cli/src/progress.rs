//! A lab run's progress on stderr: on a terminal, a bar with the trials done and the time
//! left (indicatif), the lab's notes printed above it; otherwise every line as it comes, so
//! logs and CI output stay plain.

use std::io::IsTerminal;

use corelane_lab::experiment::step_of;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Where an experiment's progress lines go.
#[derive(Debug)]
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar when stderr is a terminal, plain lines otherwise.
    pub fn for_stderr(name: &str) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(
                "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} trials, ~{eta} left",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar.set_prefix(name.to_string());
            bar
        });
        Self { bar }
    }

    /// One line from the lab: moves the bar on a runner's `[done/total]` line.
    pub fn line(&mut self, line: &str) {
        let Some(bar) = &self.bar else {
            eprintln!("{line}");
            return;
        };
        if let Some((done, total)) = step_of(line) {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }
        bar.println(line);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
