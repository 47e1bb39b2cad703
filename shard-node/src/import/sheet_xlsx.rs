//! The first worksheet of an `.xlsx`, read as a stream of cells
//! (calamine's `XlsxCellReader`): no rectangle is ever built from the
//! sheet's coordinates, and every cell that holds a value is checked
//! against the row and column ceilings before it is stored
//! ([`check_cell`]).
//!
//! Before calamine opens the file, what it would read whole is bounded
//! ([`check_parts`]): the zip directory (at most [`MAX_ZIP_ENTRIES`]
//! entries), the inflated size of all parts together
//! ([`MAX_INFLATED_BYTES`], a zip bomb), the parts read at open (package
//! and workbook relationships, workbook, theme: [`MAX_PART_BYTES`] each;
//! styles: [`MAX_STYLES_BYTES`]; shared strings: [`MAX_SHARED_STRINGS_BYTES`])
//! and the shared-string count the file claims (calamine reserves room for
//! it). The zip reader stops any part that inflates past its declared size.
//!
//! Cells must come in row order (as every spreadsheet program writes them);
//! a cell of an earlier row after a later one is refused.

use std::io::{Cursor, Read};

use calamine::Reader as _;

use crate::error::{ApiError, ApiResult};
use crate::import::sheet_cells::{cell_name, cell_text, check_cell, not_a_spreadsheet, Rows};

/// Most bytes an `.xlsx` may inflate to, all parts together.
pub const MAX_INFLATED_BYTES: u64 = 200 * 1024 * 1024;
/// Most entries in an `.xlsx`'s zip directory (a workbook has a few dozen).
pub const MAX_ZIP_ENTRIES: usize = 10_000;
/// Largest inflated relationships, workbook or theme part.
pub const MAX_PART_BYTES: u64 = 4 * 1024 * 1024;
/// Largest inflated styles part (calamine keeps a style per cell format).
pub const MAX_STYLES_BYTES: u64 = 2 * 1024 * 1024;
/// Largest inflated shared-strings part (calamine keeps every string).
pub const MAX_SHARED_STRINGS_BYTES: u64 = 16 * 1024 * 1024;
/// Fewest bytes one shared string takes in that part (`<si/>`): a claimed
/// count above the part's size over this is refused.
const MIN_SHARED_STRING_BYTES: u64 = 5;

type Book = calamine::Xlsx<Cursor<Vec<u8>>>;

pub struct Xlsx {
    book: Book,
    first: String,
    pub extra_sheets: usize,
}

impl Xlsx {
    pub fn open(bytes: Vec<u8>) -> ApiResult<Xlsx> {
        check_parts(&bytes)?;
        let book = calamine::open_workbook_from_rs::<Book, _>(Cursor::new(bytes))
            .map_err(|_| not_a_spreadsheet("xlsx"))?;
        let names = book.sheet_names();
        let Some(first) = names.first().cloned() else {
            return Err(ApiError::bad_request("The spreadsheet has no worksheet."));
        };
        Ok(Xlsx {
            book,
            first,
            extra_sheets: names.len() - 1,
        })
    }

    pub fn rows(&mut self) -> ApiResult<XlsxRows<'_>> {
        let cells = self
            .book
            .worksheet_cells_reader(&self.first)
            .map_err(|_| not_a_spreadsheet("xlsx"))?;
        Ok(XlsxRows {
            cells,
            row: None,
            pending: None,
            done: false,
        })
    }
}

pub struct XlsxRows<'a> {
    cells: calamine::XlsxCellReader<'a, Cursor<Vec<u8>>>,
    /// The sheet row being filled.
    row: Option<u32>,
    /// The first cell of the next row, read past the end of this one.
    pending: Option<(u32, u32, String)>,
    /// The sheet's cells are all read (the reader must not be asked again).
    done: bool,
}

impl XlsxRows<'_> {
    /// The next cell that holds a value, checked against the ceilings.
    fn next_cell(&mut self) -> ApiResult<Option<(u32, u32, String)>> {
        if let Some(cell) = self.pending.take() {
            return Ok(Some(cell));
        }
        while !self.done {
            let Some(cell) = self
                .cells
                .next_cell()
                .map_err(|_| not_a_spreadsheet("xlsx"))?
            else {
                self.done = true;
                break;
            };
            let (row, col) = cell.get_position();
            let text = cell_text(&calamine::Data::from(cell.get_value().clone()));
            if text.is_empty() {
                continue;
            }
            check_cell(row, col)?;
            return Ok(Some((row, col, text)));
        }
        Ok(None)
    }
}

impl Rows for XlsxRows<'_> {
    fn next_row(&mut self, out: &mut Vec<String>) -> ApiResult<bool> {
        out.clear();
        let mut any = false;
        while let Some((row, col, text)) = self.next_cell()? {
            match self.row {
                Some(current) if row > current && any => {
                    self.pending = Some((row, col, text));
                    self.row = Some(row);
                    return Ok(true);
                }
                Some(current) if row < current => {
                    return Err(ApiError::bad_request(format!(
                        "The worksheet lists cell {} after row {}: its rows are out of order. \
                         Save it again from a spreadsheet program.",
                        cell_name(row, col),
                        current as u64 + 1
                    )));
                }
                _ => {}
            }
            self.row = Some(row);
            any = true;
            let col = col as usize;
            if out.len() <= col {
                out.resize(col + 1, String::new());
            }
            out[col] = text;
        }
        Ok(any)
    }
}

fn too_large(what: &str, size: u64, cap: u64) -> ApiError {
    ApiError::bad_request(format!(
        "The .xlsx file's {what} would inflate to {size} bytes, above the {} MB an import \
         reads; save the sheet as CSV instead.",
        cap / (1024 * 1024)
    ))
}

/// Refuses what calamine would otherwise read whole past a bound (see the
/// module notes), before any part is inflated but the small ones that say
/// where the others are.
pub fn check_parts(bytes: &[u8]) -> ApiResult<()> {
    refuse_many_entries(bytes)?;
    let mut archive =
        zip::ZipArchive::new(Cursor::new(bytes)).map_err(|_| not_a_spreadsheet("xlsx"))?;
    let mut total: u64 = 0;
    let mut sizes: Vec<(String, u64)> = Vec::with_capacity(archive.len());
    for i in 0..archive.len() {
        let entry = archive
            .by_index_raw(i)
            .map_err(|_| not_a_spreadsheet("xlsx"))?;
        total = total.saturating_add(entry.size());
        let name = entry.name().map_err(|_| not_a_spreadsheet("xlsx"))?;
        sizes.push((normalized(&name), entry.size()));
    }
    if total > MAX_INFLATED_BYTES {
        return Err(ApiError::bad_request(format!(
            "The .xlsx file would inflate to {total} bytes, above the {} MB an import reads; \
             it is refused as a likely zip bomb.",
            MAX_INFLATED_BYTES / (1024 * 1024)
        )));
    }
    let size_of = |path: &str| {
        let path = normalized(path);
        sizes
            .iter()
            .filter(|(name, _)| *name == path)
            .map(|(_, size)| *size)
            .max()
    };
    let within = |path: &str, what: &str, cap: u64| match size_of(path) {
        Some(size) if size > cap => Err(too_large(what, size, cap)),
        _ => Ok(()),
    };
    within("_rels/.rels", "package relationships", MAX_PART_BYTES)?;
    let document = office_document(&mut archive)?;
    let (dir, name) = match document.rfind('/') {
        Some(i) => document.split_at(i + 1),
        None => ("", document.as_str()),
    };
    let dir = dir.strip_prefix('/').unwrap_or(dir);
    let name = if name.is_empty() {
        "workbook.xml"
    } else {
        name
    };
    within(&format!("{dir}{name}"), "workbook", MAX_PART_BYTES)?;
    within(
        &format!("{dir}_rels/{name}.rels"),
        "workbook relationships",
        MAX_PART_BYTES,
    )?;
    within(&format!("{dir}theme/theme1.xml"), "theme", MAX_PART_BYTES)?;
    within(&format!("{dir}styles.xml"), "styles", MAX_STYLES_BYTES)?;
    let strings = format!("{dir}sharedStrings.xml");
    within(&strings, "shared strings", MAX_SHARED_STRINGS_BYTES)?;
    if let Some(size) = size_of(&strings) {
        let claimed = claimed_shared_strings(&mut archive, &strings)?;
        if claimed > size / MIN_SHARED_STRING_BYTES {
            return Err(ApiError::bad_request(format!(
                "The .xlsx file's shared strings claim {claimed} strings, more than their \
                 {size} bytes can hold; the file is damaged."
            )));
        }
    }
    Ok(())
}

/// A zip path as calamine looks it up (case and separators aside).
fn normalized(path: &str) -> String {
    path.replace('\\', "/").to_ascii_lowercase()
}

/// Refuses a zip whose end-of-directory record claims more than
/// [`MAX_ZIP_ENTRIES`] entries (or a ZIP64 directory), before the
/// directory is read into memory.
fn refuse_many_entries(bytes: &[u8]) -> ApiResult<()> {
    const EOCD: [u8; 4] = [0x50, 0x4b, 0x05, 0x06];
    const EOCD_LEN: usize = 22;
    let tail_start = bytes.len().saturating_sub(EOCD_LEN + u16::MAX as usize);
    let tail = &bytes[tail_start..];
    let Some(at) = tail
        .windows(4)
        .rposition(|w| w == EOCD)
        .filter(|at| at + EOCD_LEN <= tail.len())
    else {
        return Err(not_a_spreadsheet("xlsx"));
    };
    let entries = u16::from_le_bytes([tail[at + 10], tail[at + 11]]) as usize;
    if entries > MAX_ZIP_ENTRIES {
        return Err(ApiError::bad_request(format!(
            "The .xlsx file has {} parts; an import reads files of at most {MAX_ZIP_ENTRIES}.",
            if entries == u16::MAX as usize {
                "65,535 or more".to_owned()
            } else {
                entries.to_string()
            }
        )));
    }
    Ok(())
}

/// The workbook part named by the package relationships, as calamine
/// finds it.
fn office_document(archive: &mut zip::ZipArchive<Cursor<&[u8]>>) -> ApiResult<String> {
    let xml = read_part(archive, "_rels/.rels", MAX_PART_BYTES)?;
    let mut reader = quick_xml::Reader::from_reader(xml.as_slice());
    let mut buf = Vec::new();
    let mut target = None;
    loop {
        match reader.read_event_into(&mut buf) {
            Ok(quick_xml::events::Event::Start(e) | quick_xml::events::Event::Empty(e))
                if e.local_name().as_ref() == "Relationship" =>
            {
                // As calamine reads them: `Type` raw, `Target` unescaped.
                let attr = |key: &str| {
                    e.attributes()
                        .flatten()
                        .find(|a| a.key.as_ref() == key)
                        .map(|a| a.value.into_owned())
                };
                let is_document =
                    attr("Type").is_some_and(|t| t.ends_with("/relationships/officeDocument"));
                if is_document {
                    if let Some(raw) = attr("Target") {
                        let unescaped = quick_xml::escape::unescape(&raw)
                            .map_err(|_| not_a_spreadsheet("xlsx"))?;
                        target = Some(unescaped.into_owned());
                    }
                }
            }
            Ok(quick_xml::events::Event::Eof) => break,
            Err(_) => return Err(not_a_spreadsheet("xlsx")),
            _ => {}
        }
        buf.clear();
    }
    target.ok_or_else(|| not_a_spreadsheet("xlsx"))
}

/// The `uniqueCount` the shared-strings part claims (0 when it claims
/// none), read from its first element.
fn claimed_shared_strings(
    archive: &mut zip::ZipArchive<Cursor<&[u8]>>,
    path: &str,
) -> ApiResult<u64> {
    let Some(name) = archive
        .file_names()
        .flatten()
        .find(|n| normalized(n) == normalized(path))
        .map(|n| n.into_owned())
    else {
        return Ok(0);
    };
    let part = archive
        .by_name(&name)
        .map_err(|_| not_a_spreadsheet("xlsx"))?;
    let mut reader = quick_xml::Reader::from_reader(std::io::BufReader::new(part));
    let mut buf = Vec::new();
    loop {
        match reader.read_event_into(&mut buf) {
            Ok(quick_xml::events::Event::Start(e) | quick_xml::events::Event::Empty(e))
                if e.local_name().as_ref() == "sst" =>
            {
                return Ok(e
                    .attributes()
                    .flatten()
                    .find(|a| a.key.as_ref() == "uniqueCount")
                    .and_then(|a| a.value.trim().parse().ok())
                    .unwrap_or(0));
            }
            Ok(quick_xml::events::Event::Eof) => return Ok(0),
            Err(_) => return Err(not_a_spreadsheet("xlsx")),
            _ => {}
        }
        buf.clear();
    }
}

/// A small part, inflated (its size checked first).
fn read_part(
    archive: &mut zip::ZipArchive<Cursor<&[u8]>>,
    path: &str,
    cap: u64,
) -> ApiResult<Vec<u8>> {
    let Some(name) = archive
        .file_names()
        .flatten()
        .find(|n| normalized(n) == normalized(path))
        .map(|n| n.into_owned())
    else {
        return Err(not_a_spreadsheet("xlsx"));
    };
    let part = archive
        .by_name(&name)
        .map_err(|_| not_a_spreadsheet("xlsx"))?;
    let mut out = Vec::new();
    part.take(cap)
        .read_to_end(&mut out)
        .map_err(|_| not_a_spreadsheet("xlsx"))?;
    Ok(out)
}
