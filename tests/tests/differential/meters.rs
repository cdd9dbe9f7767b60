//! The meters: what each store spent on a case, and which units are compared.

use super::*;

/// What each (scope, operation) cost between two snapshots (nothing spent: left out).
pub(crate) fn spent(
    before: &MeterSnapshot,
    after: &MeterSnapshot,
) -> BTreeMap<(String, String), Usage> {
    after
        .usage
        .iter()
        .filter_map(|(key, now)| {
            let was = before.usage.get(key).cloned().unwrap_or_default();
            let usage = Usage {
                calls: now.calls.saturating_sub(was.calls),
                attempts: now.attempts.saturating_sub(was.attempts),
                read_units: now.read_units - was.read_units,
                write_units: now.write_units - was.write_units,
                billed_requests: now.billed_requests.saturating_sub(was.billed_requests),
                reported: now.reported.saturating_sub(was.reported),
            };
            let any = usage.calls > 0 || usage.read_units != 0.0 || usage.write_units != 0.0;
            any.then(|| (key.clone(), usage))
        })
        .collect()
}

pub(crate) fn calls(spent: &BTreeMap<(String, String), Usage>) -> BTreeMap<String, u64> {
    spent
        .iter()
        .filter(|(_, u)| u.calls > 0)
        .map(|((scope, op), u)| (format!("{scope} {op}"), u.calls))
        .collect()
}

/// The scopes of [`PLAIN`] whose every call DynamoDB Local reported capacity for. It reports
/// none for a conditional write whose condition failed (the error carries none) and 0 units
/// for a Query that found nothing, where DynamoDB charges both (the simulator's bill adds
/// them back, see `corrected_units`): a plain scope with such a call in the case is
/// compared by its calls only.
pub(crate) fn faithful(dynamodb: &BTreeMap<(String, String), Usage>) -> BTreeSet<&'static str> {
    PLAIN
        .iter()
        .copied()
        .filter(|plain| {
            let mut used = dynamodb
                .iter()
                .filter(|((scope, _), _)| scope == plain)
                .peekable();
            used.peek().is_some() && used.all(|(_, u)| u.reported == u.calls)
        })
        .collect()
}

/// Read and write units per scope, of the `scopes` given.
pub(crate) fn units(
    spent: &BTreeMap<(String, String), Usage>,
    scopes: &BTreeSet<&'static str>,
) -> BTreeMap<&'static str, (f64, f64)> {
    let mut units = BTreeMap::new();
    for ((scope, _), usage) in spent {
        if let Some(plain) = scopes.get(scope.as_str()) {
            let entry: &mut (f64, f64) = units.entry(*plain).or_default();
            entry.0 += usage.read_units;
            entry.1 += usage.write_units;
        }
    }
    units
}

pub(crate) fn units_reported() -> bool {
    std::env::var("CRONLEDGER_DYNAMODB_BACKEND").as_deref() == Ok("dynamodb-local")
}

/// How the memory store answered each operation over the run (Ok or an error's code), for
/// the test's output: what the generated sequences reached.
pub(crate) static ANSWERS: Mutex<BTreeMap<(&'static str, &'static str), u64>> =
    Mutex::new(BTreeMap::new());

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
