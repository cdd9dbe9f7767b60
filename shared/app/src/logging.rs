//! The functions' log subscriber, as `lambda_runtime`'s default (level and format from
//! Lambda's logging controls) with one difference in JSON: a line carries its event and the
//! span it was written in (`span`), not the whole span list. A run's line names the run in
//! its `message` span (schedule, run, message and request id, attempt), so repeating every
//! enclosing span on every line only multiplied the bytes CloudWatch bills.

use tracing::Subscriber;
use tracing_subscriber::filter::{EnvFilter, LevelFilter};
use tracing_subscriber::fmt::MakeWriter;

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
        Box::new(logs.finish())
    }
}
