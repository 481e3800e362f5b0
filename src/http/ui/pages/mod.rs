//! One module per page: it loads what it shows and renders it.

pub mod login;
pub mod thread;
pub mod threads;
pub mod what_if;

mod decision;
mod feed;
mod records;
mod timeline;
mod what_if_view;
