//! `cargo xtask campaign-chaos`: kills a checkpointed campaign at random moments, resumes it,
//! and checks that nothing was lost, nothing ran twice, and the result is the same as an
//! uninterrupted run's; then fills the ledger's "disk" (a file-size limit) mid-write.
//!
//! The campaign is `tutti fit bootstrap` (residual-bootstrap refits of the example network)
//! from the release CLI. The checks, after every kill:
//! - the ledger is absent or a valid `tutti-ledger` JSON file with unique task ids;
//! - every record is `accepted` with `attempts == 1` and the same result as the reference;
//! - the number of records never goes down;
//!
//! and at the end: the finished ledger holds exactly the reference's records, the printed
//! confidence intervals are byte-identical, and no temporary file is left beside the ledger.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::tools::{cargo, describe, run, Failure, Workspace};

/// How many kills, how many replicates, and the seed of the kill times.
pub struct ChaosOptions {
    kills: u32,
    replicates: u32,
    seed: u64,
    /// Kill the release CLI (`cargo build --release`), or the dev-profile one (`--dev-cli`:
    /// the CLI and the workloads optimised, debug assertions on), which CI's test step has
    /// built already.
    release: bool,
}

impl ChaosOptions {
    /// Parses `--kills N`, `--replicates N`, `--seed N` (defaults 200, 1000, 1: with kills
    /// 5–100 ms apart, the campaign outlasts the kills, so every kill interrupts real work)
    /// and `--dev-cli`.
    pub fn parse(args: &[String]) -> Result<Self, Failure> {
        let mut options = Self {
            kills: 200,
            replicates: 1000,
            seed: 1,
            release: true,
        };
        let mut args = args.iter();
        while let Some(flag) = args.next() {
            if flag == "--dev-cli" {
                options.release = false;
                continue;
            }
            let value = args
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| Failure::new(format!("{flag} takes a non-negative integer")))?;
            let small = || {
                u32::try_from(value)
                    .map_err(|_| Failure::new(format!("{flag} {value} is too large")))
            };
            match flag.as_str() {
                "--kills" => options.kills = small()?,
                "--replicates" => options.replicates = small()?.max(1),
                "--seed" => options.seed = value,
                other => {
                    return Err(Failure::new(format!(
                        "campaign-chaos: unknown flag `{other}`"
                    )))
                }
            }
        }
        Ok(options)
    }
}

/// A small deterministic generator for the kill delays (splitmix64).
struct Delays(u64);

impl Delays {
    fn next_millis(&mut self, low: u64, high: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        low + (z ^ (z >> 31)) % (high - low + 1)
    }
}

/// The records of a ledger by task id: (status, attempts, result as JSON text).
type Records = BTreeMap<String, (String, u64, String)>;

fn read_records(ledger: &Path) -> Result<Option<Records>, Failure> {
    let text = match std::fs::read_to_string(ledger) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(Failure::new(format!("reading {}: {err}", ledger.display()))),
    };
    let bad = |why: String| Failure::new(format!("{} is damaged: {why}", ledger.display()));
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|err| bad(format!("not JSON ({err})")))?;
    if value["format"] != "tutti-ledger" {
        return Err(bad("no \"format\": \"tutti-ledger\"".into()));
    }
    let tasks = value["tasks"]
        .as_array()
        .ok_or_else(|| bad("no task list".into()))?;
    let mut records = Records::new();
    for task in tasks {
        let id = task["task_id"]
            .as_str()
            .ok_or_else(|| bad("a task without an id".into()))?;
        let record = (
            task["status"].as_str().unwrap_or("?").to_string(),
            task["attempts"].as_u64().unwrap_or(0),
            task["result"].to_string(),
        );
        if records.insert(id.to_string(), record).is_some() {
            return Err(bad(format!("task {id} appears twice")));
        }
    }
    Ok(Some(records))
}

/// The files in `dir` other than the ledger and its lock.
fn leftovers(dir: &Path, ledger: &Path) -> Result<Vec<String>, Failure> {
    let lock = format!("{}.lock", ledger.display());
    let entries = std::fs::read_dir(dir)
        .map_err(|err| Failure::new(format!("reading {}: {err}", dir.display())))?;
    Ok(entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path != ledger && path.display().to_string() != lock)
        .map(|path| path.display().to_string())
        .collect())
}

/// The bootstrap's printed table, without the line that carries timings and counts.
fn table(stdout: &[u8]) -> String {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter(|line| !line.starts_with("bootstrap:"))
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn run_all(workspace: &Workspace, options: &ChaosOptions) -> Result<(), Failure> {
    let profile_dir = if options.release {
        run(cargo().args(["build", "--release", "-p", "tutti-cli"]))?;
        "release"
    } else {
        // The `tutti` the test suite's command builds for the CLI's integration tests: the
        // same command with `--no-run` is up to date after the suite (CI) and reuses its
        // artifacts, where `cargo build -p tutti-cli` would re-resolve the features of a
        // single package and rebuild the workloads.
        run(cargo().args([
            "test",
            "--workspace",
            "--exclude",
            "tutti-benches",
            "--lib",
            "--bins",
            "--tests",
            "--no-run",
        ]))?;
        "debug"
    };
    let cli = workspace.target_dir.join(profile_dir).join("tutti");
    let work = workspace.target_dir.join("campaign-chaos");
    let _ = std::fs::remove_dir_all(&work);
    let dirs: Vec<PathBuf> = ["reference", "killed", "full-disk"]
        .iter()
        .map(|name| work.join(name))
        .collect();
    for dir in &dirs {
        std::fs::create_dir_all(dir)
            .map_err(|err| Failure::new(format!("creating {}: {err}", dir.display())))?;
    }
    let replicates = options.replicates.to_string();
    let bootstrap = |ledger: &Path| {
        let mut command = Command::new(&cli);
        command
            .args([
                "fit",
                "bootstrap",
                "--replicates",
                &replicates,
                "--kind",
                "cpu",
                "-d",
                "2",
                "--ledger",
            ])
            .arg(ledger)
            .env("TUTTI_LOG", "warn")
            .stdin(Stdio::null());
        command
    };

    println!(
        "==> reference: {} replicates, uninterrupted",
        options.replicates
    );
    let reference_ledger = dirs[0].join("L.json");
    let started = Instant::now();
    let reference = finish(&mut bootstrap(&reference_ledger))?;
    let reference_seconds = started.elapsed().as_secs_f64();
    let expected = read_records(&reference_ledger)?
        .ok_or_else(|| Failure::new("the reference run wrote no ledger"))?;
    check_complete(&expected, &expected, options.replicates)?;
    println!("    {reference_seconds:.2} s, {} records", expected.len());

    println!(
        "==> {} SIGKILLs at random moments (seed {}), then a resume",
        options.kills, options.seed
    );
    let ledger = dirs[1].join("L.json");
    let mut delays = Delays(options.seed);
    let mut previous = 0;
    let mut finished_early = 0;
    for kill in 0..options.kills {
        let mut child = bootstrap(&ledger)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|err| Failure::new(format!("cannot start {}: {err}", cli.display())))?;
        std::thread::sleep(Duration::from_millis(delays.next_millis(5, 100)));
        let already_done = child
            .try_wait()
            .map_err(|err| Failure::new(format!("waiting for the campaign: {err}")))?
            .is_some();
        if already_done {
            finished_early += 1;
        } else {
            child
                .kill()
                .map_err(|err| Failure::new(format!("killing the campaign: {err}")))?;
        }
        let _ = child.wait();
        let records = read_records(&ledger)
            .map_err(|err| Failure::new(format!("after kill {kill}: {err}")))?
            .unwrap_or_default();
        check_subset(&records, &expected)
            .map_err(|err| Failure::new(format!("after kill {kill}: {err}")))?;
        if records.len() < previous {
            return Err(Failure::new(format!(
                "after kill {kill}: the ledger shrank from {previous} to {} records",
                records.len()
            )));
        }
        previous = records.len();
    }
    println!(
        "    {previous} of {} records after the kills ({finished_early} runs finished before their kill came)",
        options.replicates
    );
    if previous == options.replicates as usize {
        return Err(Failure::new(
            "the campaign finished before the kills did: raise --replicates so every kill interrupts work",
        ));
    }
    let resumed = finish(&mut bootstrap(&ledger))?;
    let records =
        read_records(&ledger)?.ok_or_else(|| Failure::new("no ledger after the resume"))?;
    check_complete(&records, &expected, options.replicates)?;
    compare_tables(&reference, &resumed)?;
    let left = leftovers(&dirs[1], &ledger)?;
    if !left.is_empty() {
        return Err(Failure::new(format!(
            "files left beside the ledger: {left:?}"
        )));
    }
    println!("    resumed: every task exactly once, results identical, no temporary file left");

    println!("==> a full disk: the ledger's writes limited to 24 KiB (ulimit -f), then a rerun");
    let ledger = dirs[2].join("L.json");
    let plain = bootstrap(&ledger);
    let mut limited = Command::new("bash");
    limited
        .arg("-c")
        .arg("trap '' XFSZ; ulimit -f 24; exec \"$0\" \"$@\"")
        .arg(plain.get_program())
        .args(plain.get_args())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    println!("$ {}", describe(&limited));
    let out = limited
        .output()
        .map_err(|err| Failure::new(format!("cannot start bash: {err}")))?;
    if out.status.success() {
        return Err(Failure::new(
            "the campaign succeeded although its ledger could not grow past 24 KiB",
        ));
    }
    let message = String::from_utf8_lossy(&out.stderr);
    let kept = read_records(&ledger)?.unwrap_or_default();
    check_subset(&kept, &expected)?;
    let left = leftovers(&dirs[2], &ledger)?;
    if !left.is_empty() {
        return Err(Failure::new(format!("the failed write left {left:?}")));
    }
    println!(
        "    failed as it should ({}), {} records kept intact, no temporary file left",
        message.lines().last().unwrap_or("").trim(),
        kept.len()
    );
    let rerun = finish(&mut bootstrap(&ledger))?;
    let records =
        read_records(&ledger)?.ok_or_else(|| Failure::new("no ledger after the rerun"))?;
    check_complete(&records, &expected, options.replicates)?;
    compare_tables(&reference, &rerun)?;
    println!("    the rerun finished the campaign with identical results");
    println!("==> campaign-chaos: passed");
    Ok(())
}

/// Runs a campaign to completion and returns its standard output.
fn finish(command: &mut Command) -> Result<Vec<u8>, Failure> {
    let out = command
        .stderr(Stdio::inherit())
        .output()
        .map_err(|err| Failure::new(format!("cannot start `{}`: {err}", describe(command))))?;
    if !out.status.success() {
        return Err(Failure::new(format!(
            "`{}` failed ({})",
            describe(command),
            out.status
        )));
    }
    Ok(out.stdout)
}

/// Every record is accepted once and matches the reference's.
fn check_subset(records: &Records, expected: &Records) -> Result<(), Failure> {
    for (id, record) in records {
        if record.0 != "accepted" || record.1 != 1 {
            return Err(Failure::new(format!(
                "task {id}: status {} after {} attempt(s), expected accepted once",
                record.0, record.1
            )));
        }
        if expected.get(id) != Some(record) {
            return Err(Failure::new(format!(
                "task {id}: its result differs from the reference"
            )));
        }
    }
    Ok(())
}

fn check_complete(records: &Records, expected: &Records, replicates: u32) -> Result<(), Failure> {
    check_subset(records, expected)?;
    if records.len() != replicates as usize || records.len() != expected.len() {
        return Err(Failure::new(format!(
            "{} records, expected {replicates}",
            records.len()
        )));
    }
    Ok(())
}

fn compare_tables(reference: &[u8], other: &[u8]) -> Result<(), Failure> {
    let (reference, other) = (table(reference), table(other));
    if reference != other {
        return Err(Failure::new(format!(
            "the confidence intervals differ:\nreference:\n{reference}\nresumed:\n{other}"
        )));
    }
    Ok(())
}
