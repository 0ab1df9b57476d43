//! The `neardup` binary: parses flags and hands over to the library.

use std::process::ExitCode;

use clap::Parser;
use neardup::cli::{Cli, Command, StoreCommand};
use neardup::error::Error;
use neardup::job::{run_dedup, run_fingerprint, run_pairs, JobSpec, RunCommand, Summary};

/// Write `text` to standard output. A reader that has gone away (a closed
/// pipe, as with `| head`) is not an error; any other write failure is.
fn emit(text: &str) -> Result<(), Error> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// `value` as pretty JSON on standard output.
fn emit_json(value: &impl serde::Serialize) -> Result<(), Error> {
    emit(&format!("{}\n", serde_json::to_string_pretty(value).expect("plain data serialises")))
}

/// What a partial run left out, for the line people read.
fn partial_note(summary: &Summary) -> String {
    match summary.skipped_files.len() {
        0 => String::new(),
        n => format!("; PARTIAL: {n} input file(s) skipped (named in summary.json, skipped_files)"),
    }
}

fn report(summary: &Summary, json: bool) -> Result<(), Error> {
    if json {
        emit_json(summary)
    } else if let Some(plan) = &summary.plan {
        let mut text = format!("dry run of {}: nothing was written\n", summary.command);
        for i in &plan.inputs {
            text += &format!("input {} ({}): {} file(s), {} bytes, {} rows\n", i.name, i.url, i.files, i.bytes, i.rows);
        }
        if let Some(store) = &summary.store {
            text += &format!(
                "store {}: run '{}', {} earlier run(s), {} input document(s) already stored, IDF model {}\n",
                store.url, store.run_id, store.earlier_runs, store.already_stored, store.idf_model
            );
        }
        text += &format!("document frequencies: {}\n", plan.idf);
        for (n, stage) in plan.stages.iter().enumerate() {
            text += &format!("stage {}: {stage}\n", n + 1);
        }
        text += &format!("output {}: {}\n", plan.output, plan.output_action);
        emit(&text)
    } else if summary.command == RunCommand::Fingerprint {
        emit(&format!(
            "{} documents ({} without terms): {} distinct fingerprints; wrote {} in {:.1} s{}\n",
            summary.documents,
            summary.documents_without_terms,
            summary.distinct_fingerprints,
            summary.output,
            summary.total_ms as f64 / 1000.0,
            partial_note(summary)
        ))
    } else {
        emit(&format!(
            "{} documents ({} without terms): {} duplicates in {} clusters, {} pairs; wrote {} in {:.1} s{}\n",
            summary.documents,
            summary.documents_without_terms,
            summary.duplicates,
            summary.clusters,
            summary.pairs,
            summary.output,
            summary.total_ms as f64 / 1000.0,
            partial_note(summary)
        ))
    }
}

/// How a command that ran to its end did: complete, or partial (input files
/// left out by `--on-bad-file skip`, named in the summary and the log).
#[derive(PartialEq)]
enum Done {
    Complete,
    Partial,
}

/// Exit code 3: the run committed its outputs without some input files.
const EXIT_PARTIAL: u8 = 3;

fn done(summary: &Summary) -> Done {
    if summary.skipped_files.is_empty() { Done::Complete } else { Done::Partial }
}

async fn run(cli: Cli) -> Result<Done, Error> {
    // The servers tag their records with their role; every other command
    // logs (NEARDUP_LOG=debug: each statement's time) as the job.
    if !matches!(cli.command, Command::Scheduler(_) | Command::Executor(_)) {
        neardup::logging::init("job")?;
    }
    match cli.command {
        Command::Dedup(args) => {
            let output = &args.fingerprints.output;
            let summary = run_dedup(&args.spec()?, &output.run.options(output.quiet)).await?;
            report(&summary, output.json)?;
            return Ok(done(&summary));
        }
        Command::Fingerprint(args) => {
            let summary = run_fingerprint(&args.spec()?, &args.output.run.options(args.output.quiet)).await?;
            report(&summary, args.output.json)?;
            return Ok(done(&summary));
        }
        Command::Pairs(args) => {
            let summary = run_pairs(&args.spec()?, &args.output.run.options(args.output.quiet)).await?;
            report(&summary, args.output.json)?;
        }
        Command::Run(args) => {
            let mut spec = JobSpec::from_file(&args.job)?;
            spec.overwrite |= args.overwrite;
            if args.cluster.is_some() {
                spec.engine.cluster = args.cluster.clone();
            }
            if let Some(tls) = args.tls.files() {
                spec.engine.tls = Some(tls);
            }
            spec.apply_run_id(args.run_id.clone())?;
            let summary = run_dedup(&spec, &args.run.options(args.quiet)).await?;
            report(&summary, args.json)?;
            return Ok(done(&summary));
        }
        Command::Store(command) => store(command).await?,
        Command::Sql(args) => neardup::shell::run(&args.session()).await?,
        Command::Functions => emit(&neardup::udf::describe_all())?,
        Command::Eval(args) => {
            let ctx = neardup::session::new_context(&Default::default())?;
            let report = neardup::eval::evaluate(&ctx, &args.spec()).await?;
            if args.json {
                emit_json(&report)?;
            } else {
                emit(&report.to_string())?;
            }
        }
        Command::Report(args) => {
            let ctx = neardup::session::new_context(&Default::default())?;
            let size = neardup::job::redraw_report(&ctx, &args.output, &args.out).await?;
            eprintln!("neardup: wrote {} ({} KB): open it in a browser", args.out, size.div_ceil(1024));
        }
        Command::Scheduler(args) => {
            neardup::logging::init("scheduler")?;
            neardup::distributed::run_scheduler(args.options()).await?
        }
        Command::Executor(args) => {
            neardup::logging::init("executor")?;
            neardup::distributed::run_executor(args.options()?).await?
        }
    }
    Ok(Done::Complete)
}

/// `neardup store info` and `neardup store compact`.
async fn store(command: StoreCommand) -> Result<(), Error> {
    match command {
        StoreCommand::Info(args) => {
            let ctx = neardup::session::new_context(&Default::default())?;
            let info = neardup::job::store::info(&ctx, &args.store).await?;
            match args.json {
                true => emit_json(&info),
                false => emit(&format!("{info}\n")),
            }
        }
        StoreCommand::Compact(args) => {
            let ctx = neardup::session::context(&args.engine()).await?;
            let done = neardup::job::store::compact(&ctx, &args.store, args.all).await?;
            match args.json {
                true => emit_json(&done),
                false => emit(&format!("{}\n", done.describe())),
            }
        }
    }
}

/// Two malloc arenas a core. glibc gives threads their own heaps (arenas), up
/// to eight a core, and memory freed in one serves only the threads of that
/// one: the short-lived threads of a run (sorts, the fetch, the probe) each
/// kept the peak of their arena resident. Weibo's whole run peaked at
/// 0.99–1.09 GB, against 0.79–0.85 GB with one arena a core
/// (docs/performance.md). But with one a core, in about half of the runs two
/// busy threads shared an arena: their mallocs waited on its lock (Weibo:
/// segmentation 2.6–2.9 s against 1.7–1.9 s, the cores 1.65 busy instead of
/// 2.0). With two a core it took 1.8–2.0 s in every run, at 0.80–0.83 GB.
/// `MALLOC_ARENA_MAX`, when set, wins.
fn two_malloc_arenas_a_core() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let arenas = i32::try_from(cores.saturating_mul(2)).unwrap_or(i32::MAX);
        // SAFETY: mallopt tunes the allocator only; it runs before any other thread exists.
        unsafe { libc::mallopt(libc::M_ARENA_MAX, arenas) };
    }
}

fn main() -> ExitCode {
    two_malloc_arenas_a_core();
    let cli = Cli::parse();
    // Deep plans are decoded recursively on a cluster: give threads room.
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().thread_stack_size(16 << 20).build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("neardup: cannot start: {e}");
            return ExitCode::from(1);
        }
    };
    let log_format = cli.command.log_format();
    match runtime.block_on(run(cli)) {
        Ok(Done::Complete) => ExitCode::SUCCESS,
        Ok(Done::Partial) => ExitCode::from(EXIT_PARTIAL),
        Err(e) => {
            let (code, message) = (e.exit_code(), format!("error: {}", e.report()));
            let kind = if code == 2 { "bad input or configuration: not retryable" } else { "runtime failure: may succeed when retried" };
            log_format.line("error", "error", &message, serde_json::json!({ "exit_code": code, "kind": kind }));
            ExitCode::from(code as u8)
        }
    }
}
