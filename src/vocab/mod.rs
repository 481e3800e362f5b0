//! The ground floor: the stored vocabulary that the store, the context engine, routing
//! and the protocol all speak — what a record and an item are ([`kinds`]), the kind of
//! chat ([`chat`]), the records the event log is written from ([`records`]) and the
//! items the selector reads back ([`candidate`]). It depends only on `util`.

pub mod candidate;
pub mod chat;
pub mod kinds;
pub mod records;

pub use candidate::Candidate;
pub use chat::ChatType;
pub use kinds::{EventType, Exclusion, ItemType, MediaItemType, Role};
pub use records::{NewContextEvent, NewItem};
