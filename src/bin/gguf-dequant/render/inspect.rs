//! `inspect`: a GGUF file's header as JSON ([`to_json`]) or as text for people ([`write_text`]).

use std::collections::BTreeMap;
use std::io::{self, Write};

use gguf_dequant::dequant::metadata_json;
use gguf_dequant::gguf::{Array, GgufFile, GgufString, Value};
use gguf_dequant::Format;
use serde_json::{json, Map, Value as Json};

/// Metadata arrays with more items than this are summarised in JSON as
/// `{"array_of": TYPE, "len": N, "head": [...]}` instead of written out.
pub const JSON_ARRAY_MAX: usize = 64;
/// Items shown in the `head` of a summarised array, and in text output of any array.
pub const ARRAY_HEAD: usize = 8;
/// Characters of a string value shown in text output before it is cut with `…`.
pub const TEXT_STRING_MAX: usize = 60;

/// The file's header as JSON:
///
/// ```text
/// {"version": 3, "alignment": 32, "data_offset": 1024,
///  "shards": [{"path", "bytes", "tensors", "data_offset"}, ...],
///  "metadata": {KEY: VALUE, ...},
///  "tensors": [{"name", "type", "type_id", "dims", "n_elements", "n_bytes", "offset", "shard"}, ...]}
/// ```
///
/// * `shards` lists the files: one, or every shard of a split set; `version`, `alignment`,
///   `data_offset` and `metadata` are the first file's. `shard` indexes `shards`.
/// * `data_offset` is absolute; each tensor's `offset` is relative to its shard's data section, as
///   stored.
///   `type` is the ggml name (`"Q4_K"`), `dims` in ggml order (`ne0` first).
/// * Metadata keeps file order; values are as [`metadata_json`] writes them (integers exact,
///   non-finite floats as `"NaN"`, `"inf"`, `"-inf"`, strings lossily).
/// * Arrays of at most [`JSON_ARRAY_MAX`] items are JSON arrays; longer ones become
///   `{"array_of": TYPE, "len": N, "head": [first ARRAY_HEAD items]}` with TYPE the element type's
///   name (`"string"`, `"i32"`, `"array"`, ...). Nested arrays follow the same rule.
pub fn to_json(file: &GgufFile) -> Json {
    let mut metadata = Map::new();
    for (k, v) in file.metadata() {
        metadata.insert(k.clone(), value_json(v));
    }
    let tensors: Vec<Json> = file
        .tensors()
        .iter()
        .map(|t| {
            json!({
                "name": t.name,
                "type": t.format.name(),
                "type_id": t.format.id(),
                "dims": t.dims,
                "n_elements": t.n_elements,
                "n_bytes": t.n_bytes,
                "offset": t.offset,
                "shard": t.shard,
            })
        })
        .collect();
    let shards: Vec<Json> = file
        .shards()
        .iter()
        .map(|s| {
            json!({
                "path": crate::render::path_json(s.path()),
                "bytes": s.len(),
                "tensors": s.header().tensors.len(),
                "data_offset": s.data_offset(),
            })
        })
        .collect();
    json!({
        "version": file.version(),
        "alignment": file.alignment(),
        "data_offset": file.shards()[0].data_offset(),
        "shards": shards,
        "metadata": metadata,
        "tensors": tensors,
    })
}

/// `v` as [`metadata_json`] writes it, except that arrays longer than [`JSON_ARRAY_MAX`] (at any
/// depth) become `{"array_of", "len", "head"}`.
fn value_json(v: &Value) -> Json {
    match v {
        Value::Array(a) => array_json(a),
        v => metadata_json(v),
    }
}

fn array_json(a: &Array) -> Json {
    if a.len() <= JSON_ARRAY_MAX {
        Json::Array(a.iter().map(|v| value_json(&v)).collect())
    } else {
        let head: Vec<Json> = a.iter().take(ARRAY_HEAD).map(|v| value_json(&v)).collect();
        json!({"array_of": a.value_type().name(), "len": a.len(), "head": head})
    }
}

/// Writes a human-readable summary: file, version, counts, alignment and data offset; the metadata
/// (arrays as `[TYPE; LEN]` and their first [`ARRAY_HEAD`] items, strings cut after
/// [`TEXT_STRING_MAX`] characters); a tensor table with aligned columns; and a totals line with
/// bytes by type.
pub fn write_text(file: &GgufFile, out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "file:        {}", file.path().display())?;
    writeln!(out, "version:     {}", file.version())?;
    writeln!(out, "tensors:     {}", file.tensors().len())?;
    writeln!(out, "metadata:    {} keys", file.metadata().len())?;
    writeln!(out, "alignment:   {}", file.alignment())?;
    writeln!(out, "data offset: {}", file.shards()[0].data_offset())?;
    if file.is_split() {
        writeln!(
            out,
            "shards:      {} files, {} bytes",
            file.shards().len(),
            file.total_len()
        )?;
        for s in file.shards() {
            writeln!(
                out,
                "  {}  {} tensors, {} bytes, data at {}",
                s.path().display(),
                s.header().tensors.len(),
                s.len(),
                s.data_offset()
            )?;
        }
    }

    writeln!(out)?;
    writeln!(out, "metadata:")?;
    let key_w = file
        .metadata()
        .iter()
        .map(|(k, _)| printable(k).chars().count())
        .max()
        .unwrap_or(0);
    let types: Vec<String> = file
        .metadata()
        .iter()
        .map(|(_, v)| match v {
            Value::Array(a) => format!("[{}; {}]", a.value_type(), a.len()),
            other => other.value_type().name().to_owned(),
        })
        .collect();
    let type_w = types.iter().map(|t| t.chars().count()).max().unwrap_or(0);
    for ((k, v), ty) in file.metadata().iter().zip(&types) {
        let k = printable(k);
        writeln!(out, "  {k:<key_w$}  {ty:<type_w$}  {}", value_text(v))?;
    }

    writeln!(out)?;
    writeln!(out, "tensors:")?;
    let header = ["name", "type", "dims", "elements", "bytes", "offset"];
    let rows: Vec<[String; 6]> = file
        .tensors()
        .iter()
        .map(|t| {
            let dims: Vec<String> = t.dims.iter().map(u64::to_string).collect();
            [
                printable(&t.name).into_owned(),
                t.format.name().to_owned(),
                format!("[{}]", dims.join(", ")),
                t.n_elements.to_string(),
                t.n_bytes.to_string(),
                if file.is_split() {
                    format!("{} in shard {}", t.offset, t.shard + 1)
                } else {
                    t.offset.to_string()
                },
            ]
        })
        .collect();
    let mut w = header.map(|h| h.chars().count());
    for row in &rows {
        for (wi, cell) in w.iter_mut().zip(row) {
            *wi = (*wi).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 6]| {
        format!(
            "  {:<w0$}  {:<w1$}  {:<w2$}  {:>w3$}  {:>w4$}  {:>w5$}",
            cells[0],
            cells[1],
            cells[2],
            cells[3],
            cells[4],
            cells[5],
            w0 = w[0],
            w1 = w[1],
            w2 = w[2],
            w3 = w[3],
            w4 = w[4],
            w5 = w[5],
        )
    };
    writeln!(out, "{}", line(header).trim_end())?;
    for row in &rows {
        let cells = [
            row[0].as_str(),
            row[1].as_str(),
            row[2].as_str(),
            row[3].as_str(),
            row[4].as_str(),
            row[5].as_str(),
        ];
        writeln!(out, "{}", line(cells).trim_end())?;
    }

    // Totals, with bytes by type in type-id order.
    let mut by_type: BTreeMap<Format, (usize, u64)> = BTreeMap::new();
    let (mut elements, mut bytes) = (0u64, 0u64);
    for t in file.tensors() {
        elements = elements.saturating_add(t.n_elements);
        bytes = bytes.saturating_add(t.n_bytes);
        let e = by_type.entry(t.format).or_default();
        e.0 += 1;
        e.1 = e.1.saturating_add(t.n_bytes);
    }
    let parts: Vec<String> = by_type
        .iter()
        .map(|(f, (n, b))| format!("{f}: {b} bytes in {n}"))
        .collect();
    write!(
        out,
        "total: {} tensors, {elements} elements, {bytes} bytes",
        file.tensors().len()
    )?;
    if parts.is_empty() {
        writeln!(out)
    } else {
        writeln!(out, " ({})", parts.join(", "))
    }
}

/// `s` as is, or with control characters escaped (`\n`, `\u{1b}`) when it has any: keys and
/// tensor names come from the file and must not drive the terminal or split lines.
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    if s.chars().any(char::is_control) {
        std::borrow::Cow::Owned(s.escape_debug().to_string())
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

fn string_text(s: &GgufString) -> String {
    let lossy = s.to_string_lossy();
    let n = lossy.chars().count();
    if n <= TEXT_STRING_MAX {
        format!("{lossy:?}")
    } else {
        let cut: String = lossy.chars().take(TEXT_STRING_MAX).collect();
        format!("{cut:?}… ({} bytes)", s.len())
    }
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => string_text(s),
        Value::Array(a) => {
            let mut items: Vec<String> =
                a.iter().take(ARRAY_HEAD).map(|x| value_text(&x)).collect();
            if a.len() > ARRAY_HEAD {
                items.push(format!("… {} more", a.len() - ARRAY_HEAD));
            }
            format!("[{}]", items.join(", "))
        }
        Value::U8(x) => x.to_string(),
        Value::I8(x) => x.to_string(),
        Value::U16(x) => x.to_string(),
        Value::I16(x) => x.to_string(),
        Value::U32(x) => x.to_string(),
        Value::I32(x) => x.to_string(),
        Value::U64(x) => x.to_string(),
        Value::I64(x) => x.to_string(),
        Value::F32(x) => x.to_string(),
        Value::F64(x) => x.to_string(),
        Value::Bool(b) => b.to_string(),
    }
}
