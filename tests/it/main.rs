//! Integration tests: a real bridge over real HTTP on 127.0.0.1, real SQLite files and
//! the real Postgres, with callbacks built by the real crypto.

mod agents;
mod card_callbacks;
mod cards;
mod cli;
mod commands;
mod connections;
mod context;
mod context_order;
mod delivery;
mod errors;
mod explain;
mod fake_longconn;
mod fake_openapi;
mod feed;
mod full_loop;
mod hygiene;
mod inbox;
mod layout;
mod long_connection;
mod migrations;
mod openai_agent;
mod operating;
mod outage;
mod pending;
mod replies;
mod routing;
mod shutdown;
mod storage_faults;
mod store_conformance;
mod streaming;
mod support;
mod turns;
mod vectors;
mod vocabulary;
mod worker;
