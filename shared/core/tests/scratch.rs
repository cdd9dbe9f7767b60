use chrono::{DateTime, Utc};
use cronledger_core::Timing;

fn show(expr: &str, tz: &str, from: &str, n: usize) {
    let t = Timing::parse(expr, tz.parse().unwrap()).unwrap();
    let from: DateTime<Utc> = from.parse().unwrap();
    println!("== {expr} {tz} fixed={} desc={}", t.is_fixed_time(), t.describe());
    for x in t.next_n(from, n) {
        println!("  {} {} {:?}", x, x.with_timezone(&t.tz()), t.dst_note(x));
    }
    println!("  prev_before(from)={:?}", t.prev_before(from));
}

#[test]
fn scratch() {
    show("30 2 * * *", "America/New_York", "2026-03-07T00:00:00Z", 3);
    show("30 1 * * *", "America/New_York", "2026-10-31T00:00:00Z", 3);
    show("0 * * * *", "America/New_York", "2026-11-01T04:00:00Z", 4);
    show("*/30 * * * *", "America/New_York", "2026-03-08T06:00:00Z", 4);
    show("30 2 * * *", "Australia/Lord_Howe", "2026-10-03T00:00:00Z", 3);
    show("0 9 * * 1-5", "Asia/Seoul", "2026-11-27T00:00:00Z", 3);
    show("cron(0 9 ? * MON-FRI *)", "Asia/Seoul", "2026-11-27T00:00:00Z", 3);
    show("cron(0 9 ? * 2 *)", "Asia/Seoul", "2026-11-27T00:00:00Z", 2);
    show("rate(5 minutes)", "Asia/Seoul", "2026-11-27T00:02:00Z", 2);
    show("@weekly", "UTC", "2026-11-27T00:02:00Z", 2);
    show("0 0 L * *", "UTC", "2026-11-27T00:02:00Z", 2);
    show("0 0 * * 5#2", "UTC", "2026-11-27T00:02:00Z", 2);
    show("0 0 15W * *", "UTC", "2026-11-27T00:02:00Z", 2);
    show("0 0 13 * 5", "UTC", "2026-11-27T00:02:00Z", 4);
    let t = std::time::Instant::now();
    let r = Timing::parse("0 0 30 2 *", "UTC".parse().unwrap()).unwrap().next_after(Utc::now());
    println!("feb30 {:?} in {:?}", r, t.elapsed());
    let tm = Timing::parse("* * * * *", "America/New_York".parse().unwrap()).unwrap();
    let t = std::time::Instant::now();
    println!("{:?} in {:?}", tm.calendar_stats("2026-01-01T00:00:00Z".parse().unwrap(), 366), t.elapsed());
    let t = std::time::Instant::now();
    let n = tm.between("2026-01-01T00:00:00Z".parse().unwrap(), "2027-01-01T00:00:00Z".parse().unwrap()).count();
    println!("{n} in {:?}", t.elapsed());
    let tm = Timing::parse("0 * * * *", "America/New_York".parse().unwrap()).unwrap();
    println!("{:?}", tm.calendar_stats("2026-01-01T00:00:00Z".parse().unwrap(), 366));
    let tm = Timing::parse("30 2 * * *", "America/New_York".parse().unwrap()).unwrap();
    println!("{:?}", tm.calendar_stats("2026-01-01T00:00:00Z".parse().unwrap(), 366));
}
