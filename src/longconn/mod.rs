//! Feishu's long connection: the WebSocket a bot opens to Feishu to receive its events,
//! instead of exposing an event URL.
//!
//! The codec, with no I/O: [`frame`] reads and writes the protobuf
//! `pbbp2.Frame` each binary message holds and tells pings, pongs and data frames apart;
//! [`ack`] builds the acknowledgement every data message is answered with;
//! [`fragments`] joins a message the server split across frames; [`client_config`] reads
//! the ping and reconnect settings the server sends. A data frame's payload is the same
//! JSON envelope as an HTTP callback, left to [`crate::protocol`] to read. Those files
//! depend on no socket, HTTP framework or database.
//!
//! The connection itself: [`endpoint`] fetches a fresh URL and [`dial`] makes the
//! WebSocket handshake to it, through the egress proxy with an HTTP CONNECT [`tunnel`]
//! when the environment names one; [`session`] keeps one profile's connection up
//! (pings, pong timeout, reconnects) and hands each complete message to [`ingest`],
//! which stores it and builds its acknowledgement; [`status`] is what `/status` shows
//! of each connection. Of the application they take only [`Parts`].

pub mod ack;
pub mod client_config;
mod clock;
pub mod dial;
pub mod endpoint;
pub mod fragments;
pub mod frame;
pub mod ingest;
mod parts;
pub mod session;
pub mod status;
pub mod tunnel;

pub use client_config::{ClientConfig, Timing};
pub use fragments::{FragmentError, FragmentLimits, Fragments};
pub use frame::{Frame, FrameError, Header, Kind, METHOD_CONTROL, METHOD_DATA};
pub use parts::Parts;
