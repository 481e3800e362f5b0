//! Running an operation on a connection of its own, closed when the operation fails.

/// Runs `$body` (an async block taking `&mut` connection) on a connection of its own,
/// which is closed instead of going back to the pool when the block fails: whatever the
/// failure left of its transaction is never seen by another caller.
macro_rules! on_own_connection {
    ($pool:expr, |$conn:ident| $body:expr) => {{
        let mut pooled = $pool.acquire().await?;
        let result = {
            let $conn = &mut *pooled;
            $body.await
        };
        if result.is_err() {
            pooled.close_on_drop();
        }
        result
    }};
}
pub(crate) use on_own_connection;
