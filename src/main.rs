//! The `feishu-bridge` binary: parse the CLI, load the config, dispatch.

use std::{process::ExitCode, time::Duration};

use clap::Parser;
use feishu_bridge::{
    app,
    cli::{Cli, Command},
    config, http, ops, telemetry,
};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let command = cli.command.unwrap_or(Command::Serve);

    // Commands that need no configuration.
    match &command {
        Command::Healthcheck { url, timeout } => {
            return match ops::healthcheck(url, Duration::from_secs(*timeout)).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("unhealthy: {e:#}");
                    ExitCode::FAILURE
                }
            };
        }
        Command::Openapi => {
            print!("{}", http::openapi::yaml());
            return ExitCode::SUCCESS;
        }
        _ => {}
    }

    let env = |k: &str| std::env::var(k).ok();
    let config = match config::load(cli.config.as_deref(), &env) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("configuration error: {e}");
            return ExitCode::from(2);
        }
    };

    let result = match command {
        Command::CheckConfig => {
            print!("{}", ops::describe(&config));
            Ok(())
        }
        Command::Migrate => ops::migrate(&config).await.map(|msg| println!("{msg}")),
        Command::Serve => {
            telemetry::init_logging(config.server.log_format);
            app::run(config).await
        }
        Command::Healthcheck { .. } | Command::Openapi => Ok(()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
