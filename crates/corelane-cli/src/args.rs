//! Argument types shared by subcommands: sizes (`4K`, `1MiB`), durations, CPU lists, and the
//! Ctrl-C handling every long-running command uses.

use anyhow::Context;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use corelane::lane::StopSignal;
use corelane::udp::{RecvBackend, SendBackend};

pub use corelane::units::{parse_duration, parse_size};

/// Writes one line to stdout. A closed pipe (`corelane … | head`) is not an error worth a
/// panic: the caller learns of it from `false` and stops its work.
pub fn out(line: &str) -> bool {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}").and_then(|_| stdout.flush()).is_ok()
}

/// `println!` that survives a closed pipe (see [`out`]); evaluates to whether the line went out.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::args::out(&format!($($arg)*))
    };
}
pub(crate) use outln;

/// A stop signal raised by the first SIGINT or SIGTERM; a second one exits at once.
pub fn stop_on_signals() -> anyhow::Result<StopSignal> {
    let stop = StopSignal::new();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, stop.flag())
            .context("cannot install the signal handler")?;
        signal_hook::flag::register(sig, stop.flag())
            .context("cannot install the signal handler")?;
    }
    Ok(stop)
}

pub fn print_json(value: &impl serde::Serialize) -> bool {
    serde_json::to_string(value).is_ok_and(|line| out(&line))
}

pub fn per_second<T: serde::Serialize>(
    json: bool,
    stop: &StopSignal,
    line: impl Fn(&T) -> String,
) -> impl FnMut(&T) {
    let output_gone = stop.clone();
    move |interval| {
        let written = if json {
            print_json(&serde_json::json!({"type": "interval", "interval": interval}))
        } else {
            outln!("{}", line(interval))
        };
        if !written {
            output_gone.stop();
        }
    }
}

/// The final summary, as JSON or as text.
pub fn finish<T: serde::Serialize>(json: bool, summary: &T, text: impl Fn(&T)) {
    if json {
        print_json(&serde_json::json!({"type": "summary", "summary": summary}));
    } else {
        text(summary);
    }
}

/// `--backend` of `udp recv` and `udp echo`: every receive backend the library has, each
/// with its line of help, parsed by the library (an echo refuses one that cannot answer).
pub fn recv_backend() -> impl TypedValueParser<Value = RecvBackend> {
    let values = RecvBackend::ALL.iter().map(|b| PossibleValue::new(b.name()).help(b.about()));
    PossibleValuesParser::new(values).try_map(|name| name.parse::<RecvBackend>())
}

/// `--backend` of `udp send`: every send backend the library has, with its line of help.
pub fn send_backend() -> impl TypedValueParser<Value = SendBackend> {
    let values = SendBackend::ALL.iter().map(|b| PossibleValue::new(b.name()).help(b.about()));
    PossibleValuesParser::new(values).try_map(|name| name.parse::<SendBackend>())
}
