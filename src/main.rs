//! The `feishu-bridge` binary: parse the CLI, load the config, dispatch.

use std::{process::ExitCode, time::Duration};

use clap::Parser;
use feishu_bridge::{
    app,
    cli::{Cli, Command},
    config, http,
    ops::{self, simulate},
    telemetry,
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
        Err(errors) => {
            for e in &errors {
                eprintln!("configuration error: {e}");
            }
            if errors.len() > 1 {
                eprintln!("{} configuration errors", errors.len());
            }
            return ExitCode::from(2);
        }
    };

    let result = match command {
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
        } => {
            let profile = profile
                .or_else(|| config.profiles.first().map(|p| p.name.clone()))
                .unwrap_or_default();
            let q = feishu_bridge::ops::explanation::Query {
                profile: &profile,
                root_msg_id: &root_msg_id,
                message_id: message_id.as_deref(),
                decision_id,
                verbose,
            };
            ops::explain(&config, q, json)
                .await
                .map(|report| print!("{report}"))
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
            let url = url.unwrap_or_else(|| simulate::default_url(&config));
            let result = match (simulate::Target::new(url, &config, verbose), scenario, text) {
                (Err(e), _, _) => Err(e),
                (Ok(target), Some(path), _) => simulate::run_scenario(&target, &path).await,
                (Ok(target), None, Some(text)) => {
                    let step = simulate::Step {
                        id: message_id,
                        chat,
                        root,
                        sender,
                        sender_type: None,
                        dm,
                        text,
                        to: profile.into_iter().collect(),
                    };
                    simulate::deliver(&target, &step).await
                }
                (Ok(_), None, None) => Err(anyhow::anyhow!("give --text or --scenario")),
            };
            result.map(|out| print!("{out}"))
        }
        Command::Serve => {
            for w in config.warnings() {
                eprintln!("warning: {w}");
            }
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
