//! `cronledger audit`: the completeness audit of a range (`GET /v1/audit/completeness`), every
//! page of it, one line per schedule and the fleet's completeness. Exits 1 when the
//! completeness is below 1, so a script can gate on it.

use std::process::ExitCode;

use cronledger_contract::{CompletenessReport, ScheduleAudit};
use cronledger_core::window::utc_text;

use super::args::AuditArgs;
use super::client::{segment, Client};
use crate::commands::instant;
use crate::output::Table;
use crate::CliError;

/// Pages followed at most (each lists up to 1,000 missing windows per schedule).
const MAX_PAGES: usize = 1000;

pub async fn audit(a: AuditArgs) -> Result<ExitCode, CliError> {
    let from = instant("from", &a.from)?;
    let to = instant("to", &a.to)?;
    let client = Client::connect(&a.remote).await?;
    let mut query = format!(
        "/v1/audit/completeness?from={}&to={}",
        segment(&utc_text(from)),
        segment(&utc_text(to))
    );
    if let Some(id) = &a.schedule {
        query.push_str(&format!("&schedule={}", segment(id)));
    }
    let mut report: CompletenessReport = client.get(&query).await?;
    let mut pages = 1;
    while let Some(cursor) = report.next.take() {
        if pages == MAX_PAGES {
            return Err(CliError::msg(format!(
                "AUDIT_TOO_MANY_PAGES: more than {MAX_PAGES} pages of missing windows; audit a shorter range or one schedule"
            )));
        }
        let page: CompletenessReport = client
            .get(&format!("{query}&cursor={}", segment(&cursor)))
            .await?;
        merge(&mut report, page);
        pages += 1;
    }
    super::print(a.remote.format, &report, text);
    Ok(if report.completeness < 1.0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `page`'s missing windows appended to the same schedules' of `into`; its `next` kept.
fn merge(into: &mut CompletenessReport, page: CompletenessReport) {
    for audit in page.schedules {
        match into
            .schedules
            .iter_mut()
            .find(|s| s.schedule == audit.schedule)
        {
            Some(known) => known.missing.extend(audit.missing),
            None => into.schedules.push(audit),
        }
    }
    into.next = page.next;
}

/// One line per schedule, then the fleet's completeness.
fn text(report: &CompletenessReport) -> String {
    let mut t = Table::new([
        "SCHEDULE",
        "EXPECTED",
        "ACCOUNTED",
        "MISSING",
        "DUPLICATES",
        "UNEXPLAINED",
        "FIRST FINDING",
    ]);
    for s in &report.schedules {
        t.row([
            s.schedule.clone(),
            s.expected.to_string(),
            s.accounted.to_string(),
            s.missing_count.to_string(),
            s.duplicates.len().to_string(),
            s.unexplained.len().to_string(),
            first_finding(s),
        ]);
    }
    format!(
        "{t}completeness {:.4}% of the windows expected in [{}, {}) accounted for exactly once\n",
        report.completeness * 100.0,
        utc_text(report.from),
        utc_text(report.to)
    )
}

/// The oldest missing, duplicated or unexplained window, and what it is.
fn first_finding(s: &ScheduleAudit) -> String {
    let missing = s.missing.first().map(|t| (*t, "missing".to_string()));
    let duplicate = s
        .duplicates
        .first()
        .map(|d| (d.scheduled_for, format!("duplicate ({})", d.why)));
    let unexplained = s
        .unexplained
        .first()
        .map(|u| (u.scheduled_for, format!("unexplained ({})", u.why)));
    [missing, duplicate, unexplained]
        .into_iter()
        .flatten()
        .min_by_key(|(t, _)| *t)
        .map_or_else(|| "-".into(), |(t, what)| format!("{} {what}", utc_text(t)))
}
