//! The `neardup` binary: parses flags and hands over to the library.

use std::process::ExitCode;

use clap::Parser;
use neardup::cli::{Cli, Command};
use neardup::error::Error;
use neardup::job::{run_dedup, run_pairs, JobSpec, RunOptions, Summary};

fn report(summary: &Summary, json: bool) {
    if json {
        println!("{}", serde_json::to_string_pretty(summary).expect("summary serialises"));
    } else {
        println!(
            "{} documents ({} without terms): {} duplicates in {} clusters, {} pairs; wrote {} in {:.1} s",
            summary.documents,
            summary.documents_without_terms,
            summary.duplicates,
            summary.clusters,
            summary.pairs,
            summary.output,
            summary.total_ms as f64 / 1000.0
        );
    }
}

async fn run(cli: Cli) -> Result<(), Error> {
    match cli.command {
        Command::Dedup(args) => {
            let summary = run_dedup(&args.spec()?, &RunOptions { quiet: args.output.quiet }).await?;
            report(&summary, args.output.json);
        }
        Command::Pairs(args) => {
            let summary = run_pairs(&args.spec()?, &RunOptions { quiet: args.output.quiet }).await?;
            report(&summary, args.output.json);
        }
        Command::Run(args) => {
            let mut spec = JobSpec::from_file(&args.job)?;
            spec.overwrite |= args.overwrite;
            let summary = run_dedup(&spec, &RunOptions { quiet: args.quiet }).await?;
            report(&summary, args.json);
        }
        Command::Sql(args) => neardup::shell::run(&args).await?,
        Command::Functions => print!("{}", neardup::udf::describe_all()),
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("neardup: cannot start: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("neardup: error: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}
