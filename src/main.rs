//! The `feishu-bridge` binary: parse the CLI, load the config, dispatch.

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
    time::Duration,
};

use clap::Parser;
use feishu_bridge::{
    app,
    cli::{Cli, Command},
    config::{self, Config},
    http,
    ops::{self, simulate},
    telemetry,
};

/// The worker allocates and frees many small buffers per event (payload parsing, rows
/// bound and read back); mimalloc serves them from per-thread pages instead of the
/// system allocator's shared arenas.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let command = cli.command.unwrap_or(Command::Serve);

    // Commands that need no configuration.
    match &command {
        Command::Healthcheck { url, timeout } => return healthcheck(url, *timeout).await,
        Command::Openapi => {
            print!("{}", http::openapi::yaml());
            return ExitCode::SUCCESS;
        }
        _ => {}
    }

    let config = match load_config(cli.config.as_deref()) {
        Ok(c) => c,
        Err(code) => return code,
    };
    match run(command, config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `healthcheck`: 0 when `url` answers 2xx within `timeout` seconds, else 1.
async fn healthcheck(url: &str, timeout: u64) -> ExitCode {
    match ops::healthcheck(url, Duration::from_secs(timeout)).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("unhealthy: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The configuration, or exit code 2 once every error in it is printed.
fn load_config(path: Option<&Path>) -> Result<Config, ExitCode> {
    let env = |k: &str| std::env::var(k).ok();
    config::load(path, &env).map_err(|errors| {
        for e in &errors {
            eprintln!("configuration error: {e}");
        }
        if errors.len() > 1 {
            eprintln!("{} configuration errors", errors.len());
        }
        ExitCode::from(2)
    })
}

/// Runs a command that needs the configuration.
async fn run(command: Command, config: Config) -> anyhow::Result<()> {
    match command {
        Command::CheckConfig => {
            print!("{}", ops::describe(&config));
            Ok(())
        }
        Command::Migrate => ops::migrate(&config).await.map(|msg| println!("{msg}")),
        Command::Explain {
            root_msg_id,
            profile,
            message_id,
            decision_id,
            verbose,
            json,
            what_if,
        } => {
            let profile = profile
                .or_else(|| config.profiles.first().map(|p| p.name.clone()))
                .unwrap_or_default();
            let q = feishu_bridge::explain::Query {
                profile: &profile,
                root_msg_id: &root_msg_id,
                message_id: message_id.as_deref(),
                decision_id,
                verbose,
            };
            let report = if what_if.is_empty() {
                ops::explain(&config, q, json).await
            } else {
                ops::what_if(&config, q, &what_if, json).await
            };
            report.map(|report| print!("{report}"))
        }
        Command::Digest { date } => ops::digests::show(&config, date.as_deref())
            .await
            .map(|text| print!("{text}")),
        Command::Simulate {
            url,
            scenario,
            text,
            profile,
            chat,
            root,
            sender,
            message_id,
            dm,
            verbose,
        } => {
            let step = text.map(|text| simulate::Step {
                id: message_id,
                chat,
                root,
                sender,
                sender_type: None,
                dm,
                text,
                to: profile.into_iter().collect(),
            });
            simulated(&config, url, verbose, scenario, step)
                .await
                .map(|out| print!("{out}"))
        }
        Command::Serve => {
            for w in config.warnings() {
                eprintln!("warning: {w}");
            }
            telemetry::init_logging(config.server.log_format);
            app::run(config).await
        }
        Command::Healthcheck { .. } | Command::Openapi => Ok(()),
    }
}

/// `simulate`: a scenario file, else the one step given, posted to the bridge at `url`
/// (default: the config's listen address).
async fn simulated(
    config: &Config,
    url: Option<String>,
    verbose: bool,
    scenario: Option<PathBuf>,
    step: Option<simulate::Step>,
) -> anyhow::Result<String> {
    let url = url.unwrap_or_else(|| simulate::default_url(config));
    let target = simulate::Target::new(url, config, verbose)?;
    match (scenario, step) {
        (Some(path), _) => simulate::run_scenario(&target, &path).await,
        (None, Some(step)) => simulate::deliver(&target, &step).await,
        (None, None) => Err(anyhow::anyhow!("give --text or --scenario")),
    }
}
