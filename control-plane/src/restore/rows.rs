//! Rows streamed from the scratch instance to the new database's shard:
//! `COPY ... TO STDOUT` (text format) on one side, each complete line
//! re-tagged, `COPY ... FROM STDIN` on the other. A table is never held in
//! memory: at most one chunk of the stream and the line it ends inside.
//!
//! In COPY's text format a newline byte only ever ends a row (one inside a
//! value is written `\n`), and ids are ASCII letters and digits, so
//! re-tagging a line never touches its escapes or delimiters.

use std::io::Cursor;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::{pin_mut, SinkExt, StreamExt};
use tokio_postgres::{Client, Transaction};

use super::retag::Retag;
use crate::catalog::restores;
use crate::AppState;

/// How often the copy's progress is written to the catalog.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// Complete lines of a COPY stream, re-tagged; the unfinished last line
/// waits for the next chunk.
#[derive(Default)]
pub struct Lines {
    pending: Vec<u8>,
}

impl Lines {
    /// The complete lines so far (re-tagged) and how many there are.
    pub fn push(&mut self, chunk: &[u8], retag: &Retag) -> anyhow::Result<(Vec<u8>, u64)> {
        self.pending.extend_from_slice(chunk);
        let Some(last) = self.pending.iter().rposition(|b| *b == b'\n') else {
            return Ok((Vec::new(), 0));
        };
        let rest = self.pending.split_off(last + 1);
        let done = std::mem::replace(&mut self.pending, rest);
        let text = std::str::from_utf8(&done).context("COPY sent a line that is not UTF-8")?;
        let rows = bytecount(&done);
        Ok((retag.text(text).into_owned().into_bytes(), rows))
    }

    /// Errors when the stream ended inside a line.
    pub fn finish(self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.pending.is_empty(),
            "the COPY stream ended inside a row ({} bytes)",
            self.pending.len()
        );
        Ok(())
    }
}

fn bytecount(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|b| **b == b'\n').count() as u64
}

/// Rows copied so far, written to the restore's row now and then.
pub struct Progress {
    state: AppState,
    restore_id: String,
    pub copied: i64,
    pub total: i64,
    written: Instant,
}

impl Progress {
    pub fn new(state: &AppState, restore_id: &str, total: i64) -> Self {
        Self {
            state: state.clone(),
            restore_id: restore_id.to_string(),
            copied: 0,
            total,
            written: Instant::now(),
        }
    }

    pub async fn add(&mut self, rows: u64) -> anyhow::Result<()> {
        self.copied += i64::try_from(rows).unwrap_or(i64::MAX);
        if self.written.elapsed() >= PROGRESS_EVERY {
            self.write().await?;
        }
        Ok(())
    }

    pub async fn write(&mut self) -> anyhow::Result<()> {
        let c = self.state.session().await.context("catalog connection")?;
        restores::set_progress(&**c, &self.restore_id, self.copied, self.total).await?;
        self.written = Instant::now();
        Ok(())
    }
}

/// Streams `copy_out` on the scratch into `copy_in` on the target,
/// re-tagging each row; the rows copied.
pub async fn stream(
    scratch: &Client,
    target: &Transaction<'_>,
    copy_out: &str,
    copy_in: &str,
    retag: &Retag,
    progress: &mut Progress,
) -> anyhow::Result<u64> {
    let out = scratch
        .copy_out(copy_out)
        .await
        .with_context(|| format!("read from the scratch instance: {copy_out}"))?;
    let sink = target
        .copy_in::<_, Cursor<Vec<u8>>>(copy_in)
        .await
        .with_context(|| format!("write to the target: {copy_in}"))?;
    pin_mut!(out);
    pin_mut!(sink);
    let mut lines = Lines::default();
    let mut rows = 0;
    while let Some(chunk) = out.next().await {
        let chunk = chunk.context("read a COPY chunk from the scratch instance")?;
        let (bytes, n) = lines.push(&chunk, retag)?;
        if n > 0 {
            sink.send(Cursor::new(bytes))
                .await
                .context("write a COPY chunk to the target")?;
            rows += n;
            progress.add(n).await?;
        }
    }
    lines.finish()?;
    let written = sink
        .finish()
        .await
        .context("finish the COPY on the target")?;
    anyhow::ensure!(
        written == rows,
        "the target took {written} rows of the {rows} read ({copy_in})"
    );
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retag() -> Retag {
        Retag::new("db_AbCdE1234567", "db_XyZ09abcdefg").unwrap()
    }

    #[test]
    fn lines_split_anywhere_come_out_whole_and_retagged() {
        let rows = "rec_AbCdE0000001\tcafé rec_AbCdE0000002\n\
                    rec_AbCdE0000003\t\\N\n";
        let want = "rec_XyZ090000001\tcafé rec_XyZ090000002\n\
                    rec_XyZ090000003\t\\N\n";
        let bytes = rows.as_bytes();
        // Every split point, including inside an id and inside `é`.
        for cut in 0..=bytes.len() {
            let mut lines = Lines::default();
            let (mut out, mut n) = lines.push(&bytes[..cut], &retag()).unwrap();
            let (more, m) = lines.push(&bytes[cut..], &retag()).unwrap();
            out.extend(more);
            n += m;
            lines.finish().unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), want, "cut at {cut}");
            assert_eq!(n, 2);
        }
    }

    #[test]
    fn a_stream_ending_inside_a_row_is_an_error() {
        let mut lines = Lines::default();
        let (out, n) = lines
            .push(b"rec_AbCdE0000001\tno newline", &retag())
            .unwrap();
        assert!(out.is_empty());
        assert_eq!(n, 0);
        assert!(lines.finish().is_err());
    }
}
