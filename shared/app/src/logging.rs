//! The functions' log subscriber, as `lambda_runtime`'s default (level and format from
//! Lambda's logging controls) with two differences. In JSON a line carries its event and the
//! span it was written in (`span`), not the whole span list: a run's line names the run in
//! its `message` span (schedule, run, `message_id`, request id, attempt), so repeating every
//! enclosing span on every line only multiplied the bytes CloudWatch bills. In text a line is
//! a [`TextLine`]: the event first, its spans' fields after it, their names nowhere.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::{EnvFilter, LevelFilter};
use tracing_subscriber::fmt::format::{FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormattedFields, MakeWriter};
use tracing_subscriber::registry::LookupSpan;

/// Starts the subscriber on stdout: `AWS_LAMBDA_LOG_LEVEL` (else `RUST_LOG`, else INFO) and
/// `AWS_LAMBDA_LOG_FORMAT` (`JSON`, else text).
pub fn init_function_logs() {
    let level = std::env::var("AWS_LAMBDA_LOG_LEVEL")
        .or_else(|_| std::env::var("RUST_LOG"))
        .ok()
        .and_then(|level| level.parse::<LevelFilter>().ok())
        .unwrap_or(LevelFilter::INFO);
    let json = std::env::var("AWS_LAMBDA_LOG_FORMAT").is_ok_and(|f| f.eq_ignore_ascii_case("json"));
    // Already set (a second call): the first one stays.
    drop(tracing::subscriber::set_global_default(function_logs(
        json,
        level,
        std::io::stdout,
    )));
}

/// The functions' subscriber at `level` writing to `writer` (the simulator counts the bytes
/// it writes, so it reads nothing from the environment).
pub fn function_logs<W>(
    json: bool,
    level: LevelFilter,
    writer: W,
) -> Box<dyn Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let logs = tracing_subscriber::fmt()
        .with_target(false)
        .without_time()
        // An EnvFilter built from `level` alone (nothing read from the environment): unlike a
        // plain level it keeps callsite interest dynamic, so a subscriber set per thread (the
        // simulator's, a test's) sees lines whatever other threads registered first.
        .with_env_filter(
            EnvFilter::builder()
                .with_default_directive(level.into())
                .parse_lossy(""),
        )
        .with_writer(writer);
    if json {
        Box::new(
            logs.json()
                .with_current_span(true)
                .with_span_list(false)
                .finish(),
        )
    } else {
        Box::new(logs.event_format(TextLine { time: false }).finish())
    }
}

/// A human log line: the time (when `time`), the level, the event's message and fields, then
/// the fields of the spans it was written in, without the spans' names:
/// `INFO run attempt finished status=SUCCESS … message_id=… schedule=daily run=daily/RUN#…`.
/// tracing's own text formats put the span names first (`INFO message: run attempt
/// finished`), which reads as a label the line does not have.
#[derive(Debug, Clone, Copy)]
pub struct TextLine {
    pub time: bool,
}

impl<S, N> FormatEvent<S, N> for TextLine
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        if self.time {
            SystemTime.format_time(&mut writer)?;
            writer.write_char(' ')?;
        }
        let level = *event.metadata().level();
        if writer.has_ansi_escapes() {
            let colour = match level {
                Level::ERROR => 31,
                Level::WARN => 33,
                Level::INFO => 32,
                Level::DEBUG => 34,
                Level::TRACE => 35,
            };
            write!(writer, "\x1b[{colour}m{level:>5}\x1b[0m ")?;
        } else {
            write!(writer, "{level:>5} ")?;
        }
        ctx.format_fields(writer.by_ref(), event)?;
        for span in ctx.event_scope().into_iter().flat_map(|s| s.from_root()) {
            if let Some(fields) = span.extensions().get::<FormattedFields<N>>() {
                if !fields.is_empty() {
                    write!(writer, " {fields}")?;
                }
            }
        }
        writeln!(writer)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lock").extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// What the functions write for a worker's line in its `message` span.
    fn logged(json: bool) -> String {
        let captured = Captured::default();
        let writer = captured.clone();
        let logs = function_logs(json, LevelFilter::INFO, move || writer.clone());
        tracing::subscriber::with_default(logs, || {
            let span = tracing::info_span!(
                "message",
                message_id = "m-1",
                schedule = "daily",
                run = "daily/RUN#2026-11-29T00:00:00Z",
            );
            let _inside = span.enter();
            tracing::info!(status = "SUCCESS", "run attempt finished");
        });
        let text = captured.0.lock().expect("lock").clone();
        String::from_utf8(text).expect("utf-8")
    }

    /// `text` without its colour codes (`ESC [ … m`).
    fn plain(text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(at) = rest.find('\x1b') {
            out.push_str(&rest[..at]);
            rest = rest[at..].split_once('m').map_or("", |(_, after)| after);
        }
        out + rest
    }

    #[test]
    fn a_text_line_starts_with_its_message_not_its_span_name() {
        let line = plain(&logged(false));
        assert_eq!(
            line,
            " INFO run attempt finished status=\"SUCCESS\" message_id=\"m-1\" \
             schedule=\"daily\" run=\"daily/RUN#2026-11-29T00:00:00Z\"\n"
        );
    }

    #[test]
    fn a_json_line_keeps_the_message_id_in_its_span() {
        let line: serde_json::Value = serde_json::from_str(&logged(true)).expect("one JSON line");
        assert_eq!(line["fields"]["message"], "run attempt finished");
        assert_eq!(line["span"]["message_id"], "m-1");
        assert_eq!(line["span"]["schedule"], "daily");
    }
}
