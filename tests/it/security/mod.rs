//! Security properties, each tested against a real bridge: reads bounded against slow
//! senders, no CORS, the admin token on every route that shows conversation content
//! (with every route classified), and logs without secrets or message text at any level.

mod auth_matrix;
mod cors;
mod log_hygiene;
mod open_mode;
mod routes;
mod slow_senders;
