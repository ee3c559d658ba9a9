//! RustStream (ruststream-rdkafka) contender of cstream's benchmark harness.
//!
//! usage:
//!   cstream-bench-ruststream auto|tracked BROKERS TOPIC GROUP N
//!   cstream-bench-ruststream latency-auto|latency-tracked|latency-reply BROKERS IN_TOPIC GROUP N OUT_TOPIC tuned|defaults
//!
//! auto|tracked (throughput): decodes each record (serde_json, the framework's JSON codec) into
//! Payment, marks its id, stops once ids 0..N-1 were all seen; prints one JSON line like
//! cs_bench consume.
//!
//! latency-*: every record carries a `ts` header, "<micros>" (measured) or "w<micros>" (warm-up),
//! micros since the Unix epoch. `first` is printed at the first record of any kind.
//! latency-auto / latency-tracked (Commit::Auto / Commit::Tracked): the handler samples
//! now - ts of each measured record; after N of them one JSON line with the percentiles.
//! latency-reply (Commit::Tracked): the handler replies to OUT_TOPIC with the `ts` header's bytes
//! as the record value (a `reply(..)` subscriber whose reply is a byte-for-byte `Serialized`
//! type); after N measured inputs and the shutdown flush, one JSON line.
//! No record for BENCH_IDLE_TIMEOUT_S seconds (default 30) after the first, or none within
//! 120 s: the JSON line says "valid":false with an "error", exit 3.
//! SETTINGS "defaults": bootstrap servers, group id and StartOffset::Earliest only; "tuned"
//! adds fetch.wait.max.ms=10, fetch.min.bytes=1, socket.nagle.disable=true on every client
//! (KafkaBroker::config) and linger.ms=1 on the producer (KafkaBroker::producer_config), as cs_kafka_profile(k, CS_PROFILE_LOW_LATENCY).
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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

// ---- latency modes ----------------------------------------------------------------------------

/// The header contract of a latency record: `ts` is "<micros>" or "w<micros>" (warm-up).
#[derive(Deserialize)]
struct Stamp {
    ts: String,
}

/// The reply of latency-reply: the input's `ts` header bytes, published as they are (no codec).
#[derive(Outgoing, Serialized)]
struct Echo(Vec<u8>);

struct Lat {
    n: u64,
    started: Instant,
    /// Micros since `started` of the latest arrival plus one; 0 while none arrived.
    last_arrival: AtomicU64,
    first: AtomicBool,
    /// latency-auto/-tracked: the first N measured latencies (us).
    samples: Mutex<Vec<u64>>,
    /// latency-reply: measured inputs handled.
    replied: AtomicU64,
    done: tokio::sync::Notify,
    error: Mutex<Option<String>>,
}
static LAT: OnceLock<Lat> = OnceLock::new();
static OUT_TOPIC: OnceLock<String> = OnceLock::new();

/// The reply destination, named on the command line (the `reply(..)` clause takes a &'static str).
fn out_topic() -> &'static str { OUT_TOPIC.get().expect("OUT_TOPIC set before the app is built") }

fn now_micros() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

/// Called first thing in a latency handler body. Notes the arrival, prints `first` at the first
/// record, and returns the latency in us of a measured record (None for a warm-up one).
fn arrive(ts: &str) -> Option<u64> {
    let now = now_micros();
    let l = LAT.get().unwrap();
    l.last_arrival.store(l.started.elapsed().as_micros() as u64 + 1, Ordering::Relaxed);
    if !l.first.swap(true, Ordering::AcqRel) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "first");
        let _ = out.flush();
    }
    if ts.starts_with('w') { return None; }
    ts.parse::<u64>().ok().map(|sent| now.saturating_sub(sent))
}

fn sample(ts: &str) {
    let Some(us) = arrive(ts) else { return };
    let l = LAT.get().unwrap();
    let mut s = l.samples.lock().unwrap();
    if (s.len() as u64) < l.n {
        s.push(us);
        if s.len() as u64 == l.n { l.done.notify_one(); }
    }
}

#[subscriber(KafkaTopic::new(env("BENCH_TOPIC")).group(env("BENCH_GROUP")).start(StartOffset::Earliest))]
async fn latency_auto_handler(_p: &Payment, Headers(stamp): Headers<Stamp>) -> HandlerOutcome {
    sample(&stamp.ts);
    HandlerOutcome::ack()
}

#[subscriber(KafkaTopic::new(env("BENCH_TOPIC")).group(env("BENCH_GROUP")).start(StartOffset::Earliest).commit(Commit::Tracked))]
async fn latency_tracked_handler(_p: &Payment, Headers(stamp): Headers<Stamp>) -> HandlerOutcome {
    sample(&stamp.ts);
    HandlerOutcome::ack()
}

/// One reply per input, warm-up ones too; the delivery is acked once the reply's delivery report
/// came back (KafkaPublisher awaits it), and Commit::Tracked commits only acked offsets.
#[subscriber(
    KafkaTopic::new(env("BENCH_TOPIC")).group(env("BENCH_GROUP")).start(StartOffset::Earliest).commit(Commit::Tracked),
    reply(out_topic())
)]
async fn latency_reply_handler(_p: &Payment, Headers(stamp): Headers<Stamp>) -> Echo {
    if arrive(&stamp.ts).is_some() {
        let l = LAT.get().unwrap();
        if l.replied.fetch_add(1, Ordering::AcqRel) + 1 == l.n { l.done.notify_one(); }
    }
    Echo(stamp.ts.into_bytes())
}

fn json_escape(s: &str) -> String { s.replace('\\', "\\\\").replace('"', "\\\"") }

fn pct(s: &[u64], num: usize, den: usize) -> u64 {
    if s.is_empty() { 0 } else { s[(s.len() * num / den).min(s.len() - 1)] }
}

async fn latency_main(a: &[String]) -> ! {
    let usage = "usage: cstream-bench-ruststream latency-auto|latency-tracked|latency-reply BROKERS IN_TOPIC GROUP N OUT_TOPIC tuned|defaults";
    if a.len() != 8 || !matches!(a[1].as_str(), "latency-auto" | "latency-tracked" | "latency-reply") {
        eprintln!("{usage}");
        std::process::exit(2);
    }
    let (mode, brokers, topic, group, out, settings) = (a[1].as_str(), &a[2], &a[3], &a[4], &a[6], a[7].as_str());
    let Ok(n) = a[5].parse::<u64>() else { eprintln!("{usage}"); std::process::exit(2) };
    let tuned = match settings { "tuned" => true, "defaults" => false, _ => { eprintln!("{usage}"); std::process::exit(2) } };
    let contender = format!("ruststream-{}", mode.trim_start_matches("latency-"));
    // SAFETY: single-threaded at this point
    unsafe { std::env::set_var("BENCH_TOPIC", topic); std::env::set_var("BENCH_GROUP", group); }
    OUT_TOPIC.set(out.clone()).ok();
    LAT.set(Lat { n, started: Instant::now(), last_arrival: AtomicU64::new(0), first: AtomicBool::new(false),
                  samples: Mutex::new(Vec::with_capacity(n as usize)), replied: AtomicU64::new(0),
                  done: tokio::sync::Notify::new(), error: Mutex::new(None) }).ok();
    let l = LAT.get().unwrap();
    let complete = || match mode {
        "latency-reply" => l.replied.load(Ordering::Acquire) >= n,
        _ => l.samples.lock().unwrap().len() as u64 >= n,
    };

    // "defaults": RustStream's broker with nothing but the bootstrap servers; the group and the
    // start position ride the subscription descriptor. "tuned": KafkaBroker::config reaches every
    // client (consumers and the producer), KafkaBroker::producer_config the producer only.
    let mut broker = KafkaBroker::new([brokers.as_str()]);
    if tuned {
        broker = broker
            .config("fetch.wait.max.ms", "10")
            .config("fetch.min.bytes", "1")
            .config("socket.nagle.disable", "true")
            .producer_config("linger.ms", "1");
    }
    let app = RustStream::new(AppInfo::new("ruststream-bench", "0")).with_broker(broker, |b| match mode {
        "latency-auto" => { b.include(latency_auto_handler); }
        "latency-tracked" => { b.include(latency_tracked_handler); }
        _ => { b.include(latency_reply_handler); } // latency-reply
    });
    let idle = std::env::var("BENCH_IDLE_TIMEOUT_S").ok().and_then(|s| s.parse().ok()).unwrap_or(30u64);
    let stop = async {
        loop {
            tokio::select! {
                _ = l.done.notified() => return,
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            }
            if complete() { return; }
            let now = l.started.elapsed().as_micros() as u64;
            let last = l.last_arrival.load(Ordering::Relaxed);
            let err = if last == 0 {
                (now > 120_000_000).then(|| "no record within 120 s".to_owned())
            } else {
                (now.saturating_sub(last - 1) > idle * 1_000_000).then(|| format!("no record for {idle} s"))
            };
            if let Some(e) = err { *l.error.lock().unwrap() = Some(e); return; }
        }
    };
    let run = app.run_until(stop).await;
    let mut error = l.error.lock().unwrap().take();
    if let Err(e) = &run { error.get_or_insert_with(|| format!("ruststream: {e}")); }
    if error.is_none() && !complete() { error = Some("stopped early".to_owned()); }
    let mut line = format!("{{\"contender\":\"{contender}\",\"measured\":{n}");
    if mode == "latency-reply" {
        if let Some(e) = &mut error { *e = format!("{e}: {} of {n} measured inputs handled", l.replied.load(Ordering::Acquire)); }
    } else {
        let mut s = std::mem::take(&mut *l.samples.lock().unwrap());
        s.sort_unstable();
        line += &format!(",\"samples\":{},\"p50_us\":{},\"p90_us\":{},\"p99_us\":{},\"p999_us\":{},\"max_us\":{}",
                         s.len(), pct(&s, 50, 100), pct(&s, 90, 100), pct(&s, 99, 100), pct(&s, 999, 1000), s.last().copied().unwrap_or(0));
    }
    match &error {
        None => line += ",\"valid\":true}",
        Some(e) => line += &format!(",\"valid\":false,\"error\":\"{}\"}}", json_escape(e)),
    }
    println!("{line}");
    std::process::exit(match (&error, &run) { (None, _) => 0, (Some(_), Err(_)) => 2, (Some(_), Ok(_)) => 3 });
}

fn peak_rss_kb() -> i64 {
    std::fs::read_to_string("/proc/self/status").ok().and_then(|s| {
        s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
    }).unwrap_or(-1)
}

#[tokio::main]
async fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() > 1 && a[1].starts_with("latency-") { latency_main(&a).await; }
    if a.len() < 6 {
        eprintln!("usage: cstream-bench-ruststream auto|tracked BROKERS TOPIC GROUP N\n       cstream-bench-ruststream latency-auto|latency-tracked|latency-reply BROKERS IN_TOPIC GROUP N OUT_TOPIC tuned|defaults");
        std::process::exit(2);
    }
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
