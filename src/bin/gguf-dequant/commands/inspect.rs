//! `inspect`: a GGUF file's header, metadata and tensor table.

use std::io::Write;

use anyhow::Result;
use gguf_dequant::GgufFile;

use crate::args::InspectArgs;
use crate::render::{self, inspect};

/// Prints `args.file` as text or JSON.
pub fn run(args: &InspectArgs) -> Result<()> {
    let file = GgufFile::open(&args.file)?;
    if args.json {
        return render::print_json(&inspect::to_json(&file));
    }
    let mut out = render::stdout();
    inspect::write_text(&file, &mut out)?;
    out.flush()?;
    Ok(())
}
