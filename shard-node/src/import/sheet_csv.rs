//! CSV rows read straight from the file's bytes (`csv-core`: no copy of the
//! file, no list of rows): a row's cells are the only thing allocated, and
//! a row with more than [`MAX_COLUMNS`] cells is refused before its cells
//! are stored.

use csv_core::{ReadRecordResult, Reader};

use crate::error::{ApiError, ApiResult};
use crate::import::sheet_cells::Rows;
use crate::import::MAX_COLUMNS;

/// First size of the buffer a row's text is read into (it grows as a long
/// row needs, never past the file's size).
const ROW_BUFFER_BYTES: usize = 64 * 1024;

pub struct Csv {
    bytes: Vec<u8>,
    /// The whole file is UTF-8; otherwise every cell is read as
    /// Windows-1252.
    utf8: bool,
}

impl Csv {
    pub fn new(bytes: Vec<u8>) -> Csv {
        let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
        let utf8 = std::str::from_utf8(body).is_ok();
        Csv { bytes, utf8 }
    }

    pub fn rows(&self) -> CsvRows<'_> {
        CsvRows {
            input: &self.bytes,
            utf8: self.utf8,
            reader: Reader::new(),
            out: vec![0; ROW_BUFFER_BYTES.min(self.bytes.len() + 1)],
            ends: vec![0; MAX_COLUMNS + 1],
        }
    }
}

pub struct CsvRows<'a> {
    input: &'a [u8],
    utf8: bool,
    reader: Reader,
    out: Vec<u8>,
    ends: Vec<usize>,
}

impl CsvRows<'_> {
    fn cell(&self, bytes: &[u8]) -> String {
        if self.utf8 {
            String::from_utf8_lossy(bytes).into_owned()
        } else {
            encoding_rs::WINDOWS_1252
                .decode_without_bom_handling(bytes)
                .0
                .into_owned()
        }
    }
}

impl Rows for CsvRows<'_> {
    fn next_row(&mut self, row: &mut Vec<String>) -> ApiResult<bool> {
        row.clear();
        let (mut out_len, mut ends_len) = (0, 0);
        loop {
            let (result, nin, nout, nend) = self.reader.read_record(
                self.input,
                &mut self.out[out_len..],
                &mut self.ends[ends_len..],
            );
            self.input = &self.input[nin..];
            out_len += nout;
            ends_len += nend;
            match result {
                ReadRecordResult::InputEmpty => {}
                ReadRecordResult::OutputFull => {
                    // A cell's text is never longer than what is left of the
                    // file, so the buffer stays within the file's size.
                    let grown = (self.out.len() * 2).min(out_len + self.input.len() + 1);
                    self.out.resize(grown.max(self.out.len() + 1), 0);
                }
                ReadRecordResult::OutputEndsFull => {
                    return Err(ApiError::bad_request(format!(
                        "Line {} of the CSV file has more than {} cells; an import reads at \
                         most {MAX_COLUMNS} columns.",
                        self.reader.line(),
                        MAX_COLUMNS + 1
                    )));
                }
                ReadRecordResult::Record => {
                    let mut start = 0;
                    for &end in &self.ends[..ends_len] {
                        row.push(self.cell(&self.out[start..end]));
                        start = end;
                    }
                    return Ok(true);
                }
                ReadRecordResult::End => return Ok(false),
            }
        }
    }
}
