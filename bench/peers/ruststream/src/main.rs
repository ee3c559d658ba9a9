//! RustStream (ruststream-rdkafka) contender of cstream's benchmark harness.
//! usage: ruststream-bench auto|tracked BROKERS TOPIC GROUP N
//! Decodes each record (serde_json, the framework's JSON codec) into Payment, marks its id,
//! stops once ids 0..N-1 were all seen; prints one JSON line like cs_bench consume.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use ruststream_rdkafka::prelude::*;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct Payment {
    id: u64,
    amount_cents: u64,
    memo: String,
}

struct Run {
    n: u64,
    seen: Vec<AtomicU64>,
    distinct: AtomicU64,
    dups: AtomicU64,
    t0: Mutex<Option<Instant>>,
    t1: Mutex<Option<Instant>>,
    done: tokio::sync::Notify,
}
static RUN: OnceLock<Run> = OnceLock::new();

fn env(k: &str) -> String { std::env::var(k).expect(k) }

fn mark(p: &Payment) {
    let r = RUN.get().unwrap();
    {
        let mut t0 = r.t0.lock().unwrap();
        if t0.is_none() { *t0 = Some(Instant::now()); }
    }
    if p.id >= r.n { return; }
    let bit = 1u64 << (p.id % 64);
    let old = r.seen[(p.id / 64) as usize].fetch_or(bit, Ordering::Relaxed);
    if old & bit != 0 { r.dups.fetch_add(1, Ordering::Relaxed); return; }
    if r.distinct.fetch_add(1, Ordering::AcqRel) + 1 == r.n {
        *r.t1.lock().unwrap() = Some(Instant::now());
        r.done.notify_one();
    }
}

#[subscriber(KafkaTopic::new(env("BENCH_TOPIC")).group(env("BENCH_GROUP")))]
async fn auto_handler(p: &Payment) -> HandlerOutcome { mark(p); HandlerOutcome::ack() }

#[subscriber(KafkaTopic::new(env("BENCH_TOPIC")).group(env("BENCH_GROUP")).commit(Commit::Tracked))]
async fn tracked_handler(p: &Payment) -> HandlerOutcome { mark(p); HandlerOutcome::ack() }

fn peak_rss_kb() -> i64 {
    std::fs::read_to_string("/proc/self/status").ok().and_then(|s| {
        s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
    }).unwrap_or(-1)
}

#[tokio::main]
async fn main() {
    let a: Vec<String> = std::env::args().collect();
    let (mode, brokers, topic, group, n) = (a[1].clone(), a[2].clone(), a[3].clone(), a[4].clone(), a[5].parse::<u64>().unwrap());
    // SAFETY: single-threaded at this point
    unsafe { std::env::set_var("BENCH_TOPIC", &topic); std::env::set_var("BENCH_GROUP", &group); }
    RUN.set(Run { n, seen: (0..n / 64 + 1).map(|_| AtomicU64::new(0)).collect(), distinct: AtomicU64::new(0),
                  dups: AtomicU64::new(0), t0: Mutex::new(None), t1: Mutex::new(None), done: tokio::sync::Notify::new() }).ok();
    let start = Instant::now();
    let broker = KafkaBroker::new([brokers.as_str()])
        .config("session.timeout.ms", "6000")
        .config("partition.assignment.strategy", "range")
        .config("auto.offset.reset", "earliest");
    let tracked = mode == "tracked";
    let app = RustStream::new(AppInfo::new("ruststream-bench", "0")).with_broker(broker, |b| {
        if tracked { b.include(tracked_handler); } else { b.include(auto_handler); }
    });
    let r = RUN.get().unwrap();
    let idle = std::env::var("BENCH_IDLE_TIMEOUT_S").ok().and_then(|s| s.parse().ok()).unwrap_or(30u64);
    let stop = async {
        let mut last = 0u64; let mut last_t = Instant::now();
        loop {
            tokio::select! {
                _ = r.done.notified() => return,
                _ = tokio::time::sleep(std::time::Duration::from_millis(200)) => {}
            }
            let d = r.distinct.load(Ordering::Acquire);
            if d >= r.n { return; }
            if d != last { last = d; last_t = Instant::now(); }
            else if last_t.elapsed().as_secs() > idle { eprintln!("no progress at {d} of {}", r.n); return; }
        }
    };
    if let Err(e) = app.run_until(stop).await { eprintln!("ruststream: {e}"); std::process::exit(2); }
    let total = start.elapsed().as_secs_f64();
    let distinct = r.distinct.load(Ordering::Acquire);
    let valid = distinct == n;
    let secs = match (*r.t0.lock().unwrap(), *r.t1.lock().unwrap()) { (Some(a), Some(b)) => (b - a).as_secs_f64(), _ => 0.0 };
    println!("{{\"contender\":\"ruststream-{mode}\",\"records\":{n},\"distinct\":{distinct},\"duplicates\":{},\"bad\":0,\"seconds\":{secs:.6},\"records_per_s\":{:.1},\"allocs\":-1,\"peak_rss_kb\":{},\"total_seconds\":{total:.3},\"valid\":{valid}}}",
             r.dups.load(Ordering::Relaxed), if valid && secs > 0.0 { n as f64 / secs } else { 0.0 }, peak_rss_kb());
    std::process::exit(if valid { 0 } else { 3 });
}
