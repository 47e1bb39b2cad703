//! `request_counts` (migration 0009): requests served per database in
//! 5-minute buckets, for the control plane's `usage`.

use deadpool_postgres::GenericClient;

/// Adds `requests[i]` to the current bucket of `database_ids[i]`.
pub async fn add(
    c: &impl GenericClient,
    database_ids: &[String],
    requests: &[i64],
) -> Result<u64, tokio_postgres::Error> {
    c.execute(
        "INSERT INTO request_counts (database_id, bucket, requests)
         SELECT d, date_bin('5 minutes', now(), timestamptz '2000-01-01 00:00:00+00'), n
         FROM unnest($1::text[], $2::bigint[]) AS u (d, n)
         ON CONFLICT (database_id, bucket)
         DO UPDATE SET requests = request_counts.requests + EXCLUDED.requests",
        &[&database_ids, &requests],
    )
    .await
}

/// Deletes buckets older than a day and a bucket (nothing reads them).
pub async fn prune(c: &impl GenericClient) -> Result<u64, tokio_postgres::Error> {
    c.execute(
        "DELETE FROM request_counts WHERE bucket < now() - interval '1 day 5 minutes'",
        &[],
    )
    .await
}
