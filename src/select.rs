//! Which tensors of a file a command or a load works on: all, exact names, or glob patterns.

use crate::{Error, GgufFile, Result};

/// Which tensors of a file to take.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Selection {
    /// Every tensor.
    #[default]
    All,
    /// Exactly these tensors; a name not in the file is [`Error::NoSuchTensor`].
    Names(Vec<String>),
    /// Tensors whose name matches any of these glob patterns (`*`, `?`, `[..]`, `{a,b}`, as the
    /// `globset` crate reads them; `*` also matches `.`). A bad pattern, or one that matches no
    /// tensor, is [`Error::Selection`].
    Glob(Vec<String>),
}

impl Selection {
    /// [`Selection::Names`] from anything string-like.
    pub fn names<I: IntoIterator<Item = S>, S: Into<String>>(names: I) -> Selection {
        Selection::Names(names.into_iter().map(Into::into).collect())
    }

    /// [`Selection::Glob`] from anything string-like.
    pub fn glob<I: IntoIterator<Item = S>, S: Into<String>>(patterns: I) -> Selection {
        Selection::Glob(patterns.into_iter().map(Into::into).collect())
    }

    /// The indices into `file.tensors()` of the selected tensors, in file order, each once.
    pub fn resolve(&self, file: &GgufFile) -> Result<Vec<usize>> {
        let all = file.tensors();
        match self {
            Selection::All => Ok((0..all.len()).collect()),
            Selection::Names(names) => {
                let mut keep = vec![false; all.len()];
                for name in names {
                    let i = file.tensor_index(name).ok_or_else(|| Error::NoSuchTensor {
                        path: file.path().to_path_buf(),
                        name: name.clone(),
                    })?;
                    keep[i] = true;
                }
                Ok((0..all.len()).filter(|&i| keep[i]).collect())
            }
            Selection::Glob(patterns) => {
                let bad = |reason: String| Error::Selection {
                    path: file.path().to_path_buf(),
                    reason,
                };
                let mut builder = globset::GlobSetBuilder::new();
                for p in patterns {
                    let g = globset::GlobBuilder::new(p)
                        .literal_separator(false)
                        .build()
                        .map_err(|e| bad(format!("bad glob `{p}`: {e}")))?;
                    builder.add(g);
                }
                let set = builder
                    .build()
                    .map_err(|e| bad(format!("bad glob set: {e}")))?;
                let mut hits = vec![false; patterns.len()];
                let mut out = Vec::new();
                for (i, t) in all.iter().enumerate() {
                    let m = set.matches(&t.name);
                    if !m.is_empty() {
                        out.push(i);
                        for p in m {
                            hits[p] = true;
                        }
                    }
                }
                if let Some(i) = hits.iter().position(|h| !h) {
                    return Err(bad(format!("glob `{}` matches no tensor", patterns[i])));
                }
                Ok(out)
            }
        }
    }
}
