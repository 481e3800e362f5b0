//! What the SQL written once needs of a database, and where the two databases differ.
//!
//! [`Dialect`] is implemented by `sqlx::Sqlite` and `sqlx::Postgres` themselves. Its
//! supertraits gather, in this one place, every sqlx bound the generic store code uses:
//! executors on a connection, arguments, the column types it binds and reads, the
//! migrations. Rust implies a trait's supertraits wherever the trait is a bound, but not
//! the where-clauses a trait states about other types (`i64: Encode<Self>`), so each such
//! bound is written as a bound on the associated type of [`Same`], which is declared equal
//! to the type itself: a supertrait's associated-type bound is implied, and with the
//! equality rustc reads it as a bound on that type. What really differs between the
//! databases is a constant or a method of the trait.

use std::future::Future;

use sqlx::{
    ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Pool, Type,
    database::HasStatementCache,
    migrate::{Migrate, Migrator},
};

use crate::store::{
    Backend, NewInboxEvent, StoreError, held_claims::HeldClaims, writer_gate::WriteTurn,
};

/// `<X as Same<T>>::Is` is `T`, whatever `X`, and every user of `Same` is told so: a
/// bound on it in a supertrait is a bound on `T` that every user of the trait is given
/// (see the module header).
pub trait Same<T: ?Sized>: Is<T, Is = T> {}

impl<T: ?Sized, X: ?Sized> Same<T> for X {}

/// The associated type of [`Same`].
pub trait Is<T: ?Sized> {
    /// `T` itself.
    type Is: ?Sized;
}

impl<T: ?Sized, X: ?Sized> Is<T> for X {
    type Is = T;
}

/// A type the database binds as a statement argument.
pub trait Binds<T>: Same<T, Is: for<'q> Encode<'q, Self> + Type<Self>> + Database {}

impl<T, DB: Database> Binds<T> for DB where T: for<'q> Encode<'q, DB> + Type<DB> {}

/// A type the database binds and reads back as a column.
pub trait Holds<T>:
    Binds<T> + Same<T, Is: for<'r> Decode<'r, Self> + Type<Self>> + Database
{
}

impl<T, DB: Database> Holds<T> for DB where
    T: for<'q> Encode<'q, DB> + for<'r> Decode<'r, DB> + Type<DB>
{
}

/// One of the two databases, with everything the store's SQL needs of it: the sqlx
/// bounds as supertraits (see the module header; a column type not listed here is one
/// built on those listed, such as `UnixMs` on `i64`, or `Option<T>` read back), what
/// differs as constants and methods.
pub trait Dialect:
    Database
    + HasStatementCache
    + for<'c> Same<&'c mut <Self as Database>::Connection, Is: Executor<'c, Database = Self>>
    + for<'q> Same<<Self as Database>::Arguments<'q>, Is: IntoArguments<'q, Self>>
    + Same<<Self as Database>::Connection, Is: Migrate>
    + for<'a> Same<&'a str, Is: ColumnIndex<<Self as Database>::Row>>
    + Same<usize, Is: ColumnIndex<<Self as Database>::Row>>
    + Holds<i64>
    + Holds<bool>
    + Holds<String>
    + Binds<Option<String>>
    + Binds<Option<i64>>
    // SQLite binds a `&str` only for as long as the statement it is bound to (`'q`).
    + for<'q> Same<&'q str, Is: Encode<'q, Self> + Type<Self>>
    + for<'q> Same<Option<&'q str>, Is: Encode<'q, Self> + Type<Self>>
{
    /// Which database this is.
    const BACKEND: Backend;
    /// Its embedded migrations.
    const MIGRATOR: Migrator;
    /// Whether multi-row statements number their placeholders. Postgres needs `$n`;
    /// SQLite takes `?` in order, and in a statement of thousands of placeholders that
    /// matters: it resolves each `$n` by name, at prepare and again at bind, through a
    /// list it searches from the start (quadratic in the count).
    const NUMBERED: bool;
    /// The statement that begins a write transaction.
    const BEGIN_WRITE: &'static str;
    /// The row lock of an inbox claim.
    const CLAIM_LOCK: &'static str;
    /// The statements that open an inbox claim's transaction: they make claims take
    /// turns, and set how the claim is planned.
    const CLAIM_SERIALIZE: &'static [&'static str];
    /// The statements that make the recording of Open API calls take turns.
    const CALLS_SERIALIZE: &'static [&'static str];

    /// What a store on this database keeps besides its pool.
    type State: std::fmt::Debug + Clone + Send + Sync;

    /// How many rows a statement changed.
    fn rows_affected(done: &Self::QueryResult) -> u64;

    /// The pool writes go through: SQLite's one writer connection (see
    /// `SqliteState`), or the pool itself.
    fn writes<'a>(pool: &'a Pool<Self>, state: &'a Self::State) -> &'a Pool<Self>;

    /// Where inbox claims are held when they are not written (SQLite: see
    /// `held_claims`); `None` where every claim is written (Postgres, shared by replicas).
    fn held_claims(state: &Self::State) -> Option<&HeldClaims>;

    /// A write's turn at the database, when writers take turns in process.
    fn write_turn(state: &Self::State) -> impl Future<Output = Option<WriteTurn<'_>>> + Send;

    /// Writes a group commit of the inbox with the multi-row statement `q`; the
    /// `(profile, event_id)` of the rows that went in, once committed.
    fn write_inbox(
        pool: &Pool<Self>,
        state: &Self::State,
        q: &str,
        events: &[&NewInboxEvent],
    ) -> impl Future<Output = Result<Vec<(String, String)>, StoreError>> + Send;
}
