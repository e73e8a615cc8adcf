//! The thread pool of the CPU forward pass.
//!
//! A forward pass is a few hundred short parallel steps (one per matmul group and one per
//! attention), each tens of microseconds long during decode. A general work-stealing pool
//! parks the calling thread and wakes it again at every step, which costs as much as the step
//! itself. Here the calling thread takes part in the work, and the other threads wait for the
//! next step by spinning for a short while ([`SPIN`]) before they sleep, so that an idle
//! process does not keep cores busy (between agent rounds, or while a tool runs).
//!
//! Work is numbered pieces `0..n` handed out by an atomic counter. If another thread is
//! already running a step on the pool (two batch jobs at once), the caller runs its own step
//! alone rather than wait: with two jobs on two cores that is the fastest split anyway.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long an idle worker spins for the next step before it sleeps.
pub const SPIN: Duration = Duration::from_micros(300);

/// A step: `f(piece)` for every piece below `pieces`.
struct Job {
    /// Erased `&(dyn Fn(usize) + Sync)`; valid until the step's caller returns.
    f: *const (dyn Fn(usize) + Sync),
    pieces: usize,
}

struct Shared {
    /// Bumped for every new step.
    generation: AtomicUsize,
    job: Mutex<Option<JobPtr>>,
    next: AtomicUsize,
    /// Workers still inside the current step.
    active: AtomicUsize,
    sleeping: Mutex<usize>,
    wake: Condvar,
    busy: AtomicBool,
}

#[derive(Clone, Copy)]
struct JobPtr(*const Job);
// SAFETY: the job outlives every worker's use of it (see `Pool::run`).
unsafe impl Send for JobPtr {}

/// A fixed set of worker threads plus the calling thread.
pub struct Pool {
    shared: Arc<Shared>,
    threads: usize,
    /// Why fewer threads than asked for were started, for the caller to report.
    warning: Option<String>,
}

static POOL: OnceLock<Pool> = OnceLock::new();
static WANTED: AtomicUsize = AtomicUsize::new(0);

/// Sets the number of threads (the caller included) of the global pool. Takes effect only
/// before the pool's first use; returns whether it did.
pub fn set_threads(threads: usize) -> bool {
    WANTED.store(threads.max(1), Ordering::SeqCst);
    POOL.get().is_none_or(|p| p.threads == threads.max(1))
}

/// The global pool: the `--threads` setting, else every core.
pub fn global() -> &'static Pool {
    POOL.get_or_init(|| {
        let n = match WANTED.load(Ordering::SeqCst) {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        };
        Pool::new(n)
    })
}

impl Pool {
    /// A pool of `threads` threads in all: the caller of [`Pool::run`] and `threads - 1`
    /// workers (fewer, with a [`Pool::warning`], if the system refuses to start them).
    pub fn new(threads: usize) -> Pool {
        let threads = threads.max(1);
        let shared = Arc::new(Shared {
            generation: AtomicUsize::new(0),
            job: Mutex::new(None),
            next: AtomicUsize::new(0),
            active: AtomicUsize::new(0),
            sleeping: Mutex::new(0),
            wake: Condvar::new(),
            busy: AtomicBool::new(false),
        });
        let mut started = 1;
        let mut warning = None;
        for i in 1..threads {
            let s = shared.clone();
            match std::thread::Builder::new()
                .name(format!("cairn-cpu-{i}"))
                .spawn(move || worker(&s))
            {
                Ok(_) => started += 1,
                Err(e) => {
                    // Fewer threads is slower, not wrong: say so and go on with those started.
                    warning = Some(format!(
                        "could not start CPU thread {} of {threads} ({e}); running on {started}",
                        i + 1
                    ));
                    break;
                }
            }
        }
        Pool {
            shared,
            threads: started,
            warning,
        }
    }

    /// Threads in all, the caller included.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Why the pool runs on fewer threads than asked for, if it does (the CLI shows it).
    pub fn warning(&self) -> Option<&str> {
        self.warning.as_deref()
    }

    /// Runs `f(i)` for every `i` in `0..pieces`, spread over the pool; returns when all are
    /// done.
    pub fn run(&self, pieces: usize, f: &(dyn Fn(usize) + Sync)) {
        if pieces == 0 {
            return;
        }
        let s = &*self.shared;
        if self.threads == 1
            || pieces == 1
            || s.busy
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            (0..pieces).for_each(f);
            return;
        }
        // SAFETY (lifetime erasure): workers use `f` only between the generation bump below
        // and their `active` decrement, and this function waits for `active == 0` first.
        let f: *const (dyn Fn(usize) + Sync) = unsafe { std::mem::transmute(f) };
        let job = Job { f, pieces };
        s.next.store(0, Ordering::Relaxed);
        s.active.store(self.threads - 1, Ordering::Relaxed);
        *s.job.lock().unwrap_or_else(|e| e.into_inner()) = Some(JobPtr(&job));
        s.generation.fetch_add(1, Ordering::Release);
        if *s.sleeping.lock().unwrap_or_else(|e| e.into_inner()) > 0 {
            s.wake.notify_all();
        }
        take_pieces(s, &job);
        while s.active.load(Ordering::Acquire) != 0 {
            std::hint::spin_loop();
        }
        *s.job.lock().unwrap_or_else(|e| e.into_inner()) = None;
        s.busy.store(false, Ordering::Release);
    }
}

/// Runs `f(i)` for every row `i` in `0..n` on the global pool, in a few runs of rows per
/// thread; short batches (decode) stay on the calling thread.
pub fn for_rows(n: usize, f: &(dyn Fn(usize) + Sync)) {
    const SERIAL_BELOW: usize = 8;
    let pool = global();
    if n < SERIAL_BELOW || pool.threads() == 1 {
        (0..n).for_each(f);
        return;
    }
    let pieces = n.min(pool.threads() * 4);
    pool.run(pieces, &|p| {
        (p * n / pieces..(p + 1) * n / pieces).for_each(f)
    });
}

fn take_pieces(s: &Shared, job: &Job) {
    loop {
        let i = s.next.fetch_add(1, Ordering::Relaxed);
        if i >= job.pieces {
            break;
        }
        // SAFETY: see `Pool::run`.
        unsafe { (*job.f)(i) };
    }
}

fn worker(s: &Shared) {
    // Generation 0 means no step yet: a worker that starts after the first step was posted
    // still takes part in it (the caller waits for every worker).
    let mut seen = 0;
    loop {
        // Spin for the next step, then sleep until one is posted.
        let start = Instant::now();
        let mut spins = 0u32;
        while s.generation.load(Ordering::Acquire) == seen {
            std::hint::spin_loop();
            spins += 1;
            if spins.is_multiple_of(256) && start.elapsed() > SPIN {
                let mut sleeping = s.sleeping.lock().unwrap_or_else(|e| e.into_inner());
                *sleeping += 1;
                while s.generation.load(Ordering::Acquire) == seen {
                    sleeping = s.wake.wait(sleeping).unwrap_or_else(|e| e.into_inner());
                }
                *sleeping -= 1;
                break;
            }
        }
        seen = s.generation.load(Ordering::Acquire);
        let job = *s.job.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(JobPtr(job)) = job {
            // SAFETY: the caller keeps the job alive until `active` reaches zero.
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                take_pieces(s, unsafe { &*job })
            }));
            if ran.is_err() {
                // The step's caller would wait for this worker forever, with part of its
                // output never written: stop rather than return wrong numbers.
                eprintln!("cairn: internal error in a CPU worker thread; stopping");
                std::process::abort();
            }
        }
        s.active.fetch_sub(1, Ordering::Release);
    }
}

/// A pointer into an output buffer that the pieces of one step share, each writing its own
/// disjoint part of it.
pub(crate) struct SendPtr(pub(crate) *mut f32);
// SAFETY: each piece of work writes its own part of the output (callers see to it).
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

impl SendPtr {
    /// The pointer `i` values in.
    pub(crate) fn at(&self, i: usize) -> *mut f32 {
        // SAFETY: callers stay inside the buffer the pointer came from.
        unsafe { self.0.add(i) }
    }
}
