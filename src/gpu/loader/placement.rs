//! Where each tensor of one model goes when the model is spread over several GPU devices: whole
//! layers per device, split by proportions (llama.cpp's `--tensor-split`) or by memory budgets,
//! and the input and output tensors on devices of their own. Pure logic: nothing is allocated, so
//! a placement that cannot work fails before any device is touched.

use std::collections::BTreeMap;

use super::Residency;
use crate::gguf::TensorInfo;
use crate::{Error, GgufFile, Result, Selection};

/// How the layers (`blk.N.*` tensors) are split over the devices: one entry per device, in
/// device order.
#[derive(Clone, Debug, PartialEq)]
pub enum Split {
    /// Relative shares of the layers, by layer count, as llama.cpp's `--tensor-split 3,1` splits
    /// them: with `c[d]` the shares summed up to device `d` over their total, the `i`-th of the `n`
    /// selected layers goes to the first device whose `c[d] > i / n`. Shares are finite, not
    /// negative and not all zero; a device of share 0 gets no layers. No size is checked.
    Proportions(Vec<f64>),
    /// Each device's budget of resident bytes (raw blocks, or values times the dtype's size;
    /// buffer padding and staging not counted: cap those with each loader's
    /// [`super::LoadOptions::gpu_budget_bytes`]). The input and output tensors are counted first
    /// on their devices, then each layer goes to the first device, in order, from the one the
    /// layer before went to, that still has room for it. A selection that does not fit is
    /// [`Error::OverBudget`].
    Budgets(Vec<u64>),
}

/// Which device each tensor of one model goes to. Every tensor goes to exactly one device; the
/// tensors of one layer (`blk.N.*`) stay together.
#[derive(Clone, Debug, PartialEq)]
pub struct Placement {
    /// How the layers are split; its length is the number of devices.
    pub split: Split,
    /// The device of the input tensors: every tensor that is neither `blk.N.*` nor `output*`
    /// (`token_embd.*`, rope tables, ...). [`Placement::new`]: the first device.
    pub input: usize,
    /// The device of the output tensors (names starting with `output`: `output.weight`,
    /// `output_norm.*`). [`Placement::new`]: the last device (llama.cpp's convention).
    pub output: usize,
}

/// What a tensor is to the placement, from its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// A tensor of layer `N` (`blk.N.*`).
    Layer(u64),
    /// An input tensor: neither a layer's nor an output tensor.
    Input,
    /// An output tensor (a name starting with `output`).
    Output,
}

impl Role {
    /// The role of the tensor named `name`.
    pub fn of(name: &str) -> Role {
        let layer = name
            .strip_prefix("blk.")
            .and_then(|rest| rest.split_once('.'))
            .filter(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|(n, _)| n.parse().ok());
        match layer {
            Some(n) => Role::Layer(n),
            None if name.starts_with("output") => Role::Output,
            None => Role::Input,
        }
    }
}

/// Bytes a tensor takes resident as `residency` (padding not counted): its raw bytes, or its
/// values times the dtype's size.
pub fn resident_bytes(info: &TensorInfo, residency: Residency) -> u64 {
    match residency {
        Residency::Raw => info.n_bytes,
        Residency::Dequantised(d) => info.n_elements.saturating_mul(d.size() as u64),
    }
}

impl Placement {
    /// `split` with the input tensors on the first device and the output tensors on the last.
    pub fn new(split: Split) -> Placement {
        let devices = match &split {
            Split::Proportions(p) => p.len(),
            Split::Budgets(b) => b.len(),
        };
        Placement {
            split,
            input: 0,
            output: devices.saturating_sub(1),
        }
    }

    /// [`Split::Proportions`] of `shares`, input first and output last.
    pub fn proportions(shares: impl IntoIterator<Item = f64>) -> Placement {
        Placement::new(Split::Proportions(shares.into_iter().collect()))
    }

    /// Equal shares of the layers over `devices` devices, input first and output last.
    pub fn even(devices: usize) -> Placement {
        Placement::proportions(vec![1.0; devices])
    }

    /// [`Split::Budgets`] of `bytes` per device, input first and output last.
    pub fn budgets(bytes: impl IntoIterator<Item = u64>) -> Placement {
        Placement::new(Split::Budgets(bytes.into_iter().collect()))
    }

    /// The number of devices: the length of the split.
    pub fn devices(&self) -> usize {
        match &self.split {
            Split::Proportions(p) => p.len(),
            Split::Budgets(b) => b.len(),
        }
    }

    /// The tensors of `file` that `selection` picks, per device: indices into `file.tensors()`,
    /// in file order. Sizes are those of `residency` ([`resident_bytes`]).
    ///
    /// Errors: those of [`Selection::resolve`]; [`Error::Placement`] for a placement that
    /// names no device, a device past the split, or bad shares; [`Error::OverBudget`] when
    /// [`Split::Budgets`] cannot hold the selection.
    pub fn assign(
        &self,
        file: &GgufFile,
        selection: &Selection,
        residency: Residency,
    ) -> Result<Vec<Vec<usize>>> {
        let selected = selection.resolve(file)?;
        let all = file.tensors();
        let sizes: Vec<(&str, u64)> = selected
            .iter()
            .map(|&i| (all[i].name.as_str(), resident_bytes(&all[i], residency)))
            .collect();
        Ok(self
            .assign_sizes(&sizes)?
            .into_iter()
            .map(|share| share.into_iter().map(|j| selected[j]).collect())
            .collect())
    }

    /// [`Placement::assign`] over a list of `(name, resident bytes)`: per device, indices into
    /// `tensors`, in order.
    pub fn assign_sizes(&self, tensors: &[(&str, u64)]) -> Result<Vec<Vec<usize>>> {
        let n = self.devices();
        self.check(n)?;
        // The selected layers in number order, each with its tensors and bytes.
        let mut layers: BTreeMap<u64, (Vec<usize>, u64)> = BTreeMap::new();
        let mut device_of = vec![0; tensors.len()];
        let mut fixed = vec![0u64; n];
        for (i, &(name, bytes)) in tensors.iter().enumerate() {
            let device = match Role::of(name) {
                Role::Layer(l) => {
                    let entry = layers.entry(l).or_default();
                    entry.0.push(i);
                    entry.1 = entry.1.saturating_add(bytes);
                    continue;
                }
                Role::Input => self.input,
                Role::Output => self.output,
            };
            device_of[i] = device;
            fixed[device] = fixed[device].saturating_add(bytes);
        }
        let layers: Vec<(u64, (Vec<usize>, u64))> = layers.into_iter().collect();
        let layer_devices = match &self.split {
            Split::Proportions(shares) => by_proportions(shares, layers.len()),
            Split::Budgets(budgets) => self.by_budgets(budgets, &fixed, &layers)?,
        };
        for ((_, (members, _)), device) in layers.iter().zip(layer_devices) {
            for &i in members {
                device_of[i] = device;
            }
        }
        let mut out = vec![Vec::new(); n];
        for (i, d) in device_of.into_iter().enumerate() {
            out[d].push(i);
        }
        Ok(out)
    }

    /// A placement that can be applied to `n` devices.
    fn check(&self, n: usize) -> Result<()> {
        let bad = |reason: String| Err(Error::Placement { reason });
        if n == 0 {
            return bad("the split names no device".into());
        }
        for (what, d) in [("input", self.input), ("output", self.output)] {
            if d >= n {
                return bad(format!("{what} device {d} is not one of the {n} devices"));
            }
        }
        if let Split::Proportions(shares) = &self.split {
            if let Some(s) = shares.iter().find(|s| !s.is_finite() || **s < 0.0) {
                return bad(format!("share {s} is not a finite number of at least 0"));
            }
            if shares.iter().sum::<f64>() <= 0.0 {
                return bad("the shares are all zero".into());
            }
        }
        Ok(())
    }

    /// The device of each layer under `budgets`: filled in order, after the `fixed` bytes of the
    /// input and output tensors.
    fn by_budgets(
        &self,
        budgets: &[u64],
        fixed: &[u64],
        layers: &[(u64, (Vec<usize>, u64))],
    ) -> Result<Vec<usize>> {
        for (d, (&used, &budget)) in fixed.iter().zip(budgets).enumerate() {
            if used > budget {
                let what = match (d == self.input, d == self.output) {
                    (true, true) => "the input and output tensors",
                    (true, false) => "the input tensors",
                    _ => "the output tensors",
                };
                return Err(Error::OverBudget {
                    device: d,
                    what: what.into(),
                    needed: used,
                    budget,
                });
            }
        }
        let mut used = fixed.to_vec();
        let mut device = 0;
        let mut out = Vec::with_capacity(layers.len());
        for (at, (layer, (_, bytes))) in layers.iter().enumerate() {
            while device < budgets.len() && used[device].saturating_add(*bytes) > budgets[device] {
                device += 1;
            }
            if device == budgets.len() {
                // Name the last device with everything that would have to go there.
                let last = budgets.len() - 1;
                let rest: u64 = layers[at..].iter().map(|(_, (_, b))| *b).sum();
                let final_layer = layers[layers.len() - 1].0;
                return Err(Error::OverBudget {
                    device: last,
                    what: format!(
                        "layers {layer}..={final_layer}, with the {} bytes it already holds,",
                        used[last]
                    ),
                    needed: used[last].saturating_add(rest),
                    budget: budgets[last],
                });
            }
            used[device] += bytes;
            out.push(device);
        }
        Ok(out)
    }
}

/// The device of each of `n` layers under `shares` (llama.cpp's rule, see
/// [`Split::Proportions`]).
fn by_proportions(shares: &[f64], n: usize) -> Vec<usize> {
    let total: f64 = shares.iter().sum();
    let cumulative: Vec<f64> = shares
        .iter()
        .scan(0.0, |sum, s| {
            *sum += s;
            Some(*sum / total)
        })
        .collect();
    (0..n)
        .map(|i| {
            let x = i as f64 / n as f64;
            cumulative
                .iter()
                .position(|&c| c > x)
                .unwrap_or(shares.len() - 1)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model of `layers` layers, each of two tensors of `layer_bytes / 2`, plus
    /// `token_embd.weight`, `rope_freqs.weight`, `output_norm.weight` and `output.weight`.
    fn model(layers: u64, layer_bytes: u64) -> Vec<(String, u64)> {
        let mut t = vec![
            ("token_embd.weight".to_string(), 1000),
            ("rope_freqs.weight".to_string(), 10),
        ];
        for l in 0..layers {
            t.push((format!("blk.{l}.attn_q.weight"), layer_bytes / 2));
            t.push((format!("blk.{l}.ffn_up.weight"), layer_bytes / 2));
        }
        t.push(("output_norm.weight".to_string(), 20));
        t.push(("output.weight".to_string(), 2000));
        t
    }

    fn assign(p: &Placement, t: &[(String, u64)]) -> Result<Vec<Vec<usize>>> {
        let refs: Vec<(&str, u64)> = t.iter().map(|(n, b)| (n.as_str(), *b)).collect();
        p.assign_sizes(&refs)
    }

    /// Per device: the layer numbers it holds, and the non-layer tensors it holds by name; and
    /// every tensor assigned exactly once.
    fn summary(t: &[(String, u64)], out: &[Vec<usize>]) -> Vec<(Vec<u64>, Vec<String>)> {
        let mut seen = vec![0; t.len()];
        let s = out
            .iter()
            .map(|share| {
                let mut layers = Vec::new();
                let mut others = Vec::new();
                for &i in share {
                    seen[i] += 1;
                    match Role::of(&t[i].0) {
                        Role::Layer(l) => layers.push(l),
                        _ => others.push(t[i].0.clone()),
                    }
                }
                layers.dedup();
                (layers, others)
            })
            .collect();
        assert!(seen.iter().all(|&c| c == 1), "{seen:?}");
        for share in out {
            assert!(
                share.windows(2).all(|w| w[0] < w[1]),
                "file order: {share:?}"
            );
        }
        s
    }

    fn layers_of(t: &[(String, u64)], out: &[Vec<usize>]) -> Vec<Vec<u64>> {
        summary(t, out).into_iter().map(|(l, _)| l).collect()
    }

    #[test]
    fn roles_come_from_the_names() {
        assert_eq!(Role::of("blk.0.attn_q.weight"), Role::Layer(0));
        assert_eq!(Role::of("blk.31.ffn_down.weight"), Role::Layer(31));
        assert_eq!(Role::of("output.weight"), Role::Output);
        assert_eq!(Role::of("output_norm.weight"), Role::Output);
        for input in [
            "token_embd.weight",
            "rope_freqs.weight",
            "blk.x.attn_q.weight",
            "blk..weight",
            "blk.3",
            "blk.-1.a",
            "blk.+1.a",
        ] {
            assert_eq!(Role::of(input), Role::Input, "{input}");
        }
    }

    #[test]
    fn proportions_split_layers_by_count_like_llama_cpp() {
        let t = model(6, 100);
        // Equal shares over 3 devices: 2 layers each.
        let out = assign(&Placement::even(3), &t).unwrap();
        assert_eq!(layers_of(&t, &out), [vec![0, 1], vec![2, 3], vec![4, 5]]);
        // 3,1: c = [0.75, 1]; layer i/6 < 0.75 for i = 0..=4.
        let out = assign(&Placement::proportions([3.0, 1.0]), &t).unwrap();
        assert_eq!(layers_of(&t, &out), [vec![0, 1, 2, 3, 4], vec![5]]);
        // A zero share gets no layers, whatever its place.
        let out = assign(&Placement::proportions([0.0, 1.0, 0.0, 1.0]), &t).unwrap();
        assert_eq!(
            layers_of(&t, &out),
            [vec![], vec![0, 1, 2], vec![], vec![3, 4, 5]]
        );
        // One device holds everything.
        let out = assign(&Placement::even(1), &t).unwrap();
        assert_eq!(out, [(0..t.len()).collect::<Vec<_>>()]);
        // Sizes do not matter to proportions.
        let mut uneven = model(6, 100);
        uneven[2].1 = 1 << 40;
        let out = assign(&Placement::even(3), &uneven).unwrap();
        assert_eq!(layers_of(&t, &out), [vec![0, 1], vec![2, 3], vec![4, 5]]);
    }

    #[test]
    fn proportions_count_only_the_selected_layers() {
        // Layers 10..16 of a bigger model: positions, not numbers, are split.
        let t: Vec<(String, u64)> = (10..16)
            .map(|l| (format!("blk.{l}.attn_q.weight"), 7))
            .collect();
        let out = assign(&Placement::even(2), &t).unwrap();
        assert_eq!(layers_of(&t, &out), [vec![10, 11, 12], vec![13, 14, 15]]);
    }

    #[test]
    fn input_and_output_go_where_they_are_told() {
        let t = model(4, 100);
        let out = assign(&Placement::even(3), &t).unwrap();
        let s = summary(&t, &out);
        assert_eq!(s[0].1, ["token_embd.weight", "rope_freqs.weight"]);
        assert!(s[1].1.is_empty());
        assert_eq!(s[2].1, ["output_norm.weight", "output.weight"]);

        let p = Placement {
            input: 2,
            output: 0,
            ..Placement::even(3)
        };
        let s = summary(&t, &assign(&p, &t).unwrap());
        assert_eq!(s[2].1, ["token_embd.weight", "rope_freqs.weight"]);
        assert_eq!(s[0].1, ["output_norm.weight", "output.weight"]);
        // Layers are split as before.
        assert_eq!(s[0].0, [0, 1]);
        assert_eq!(s[1].0, [2]);
        assert_eq!(s[2].0, [3]);

        let p = Placement {
            input: 1,
            output: 1,
            ..Placement::even(3)
        };
        let s = summary(&t, &assign(&p, &t).unwrap());
        assert_eq!(s[1].1.len(), 4);
    }

    #[test]
    fn budgets_fill_devices_in_order() {
        // Input 1010 bytes, output 2020, layers 100 each.
        let t = model(6, 100);
        // Device 0: input + 3 layers (1310); device 1: 2 layers; device 2: the rest + output.
        let out = assign(&Placement::budgets([1310, 250, 10_000]), &t).unwrap();
        let s = summary(&t, &out);
        assert_eq!(s[0].0, [0, 1, 2]);
        assert_eq!(s[1].0, [3, 4]);
        assert_eq!(s[2].0, [5]);
        assert_eq!(s[2].1, ["output_norm.weight", "output.weight"]);
        // A layer that fills a budget exactly still goes there; the next one spills over.
        let out = assign(&Placement::budgets([1210, 1 << 20]), &t).unwrap();
        assert_eq!(layers_of(&t, &out), [vec![0, 1], vec![2, 3, 4, 5]]);
        // A device too small for any layer is passed over; layers never go back.
        let out = assign(&Placement::budgets([1010, 150, 1 << 20]), &t).unwrap();
        assert_eq!(layers_of(&t, &out), [vec![], vec![0], vec![1, 2, 3, 4, 5]]);
        // The output's bytes count on the output device before any layer: 2020 + 5 layers.
        let out = assign(&Placement::budgets([1110, 2520]), &t).unwrap();
        assert_eq!(layers_of(&t, &out), [vec![0], vec![1, 2, 3, 4, 5]]);
        assert!(assign(&Placement::budgets([1110, 2519]), &t).is_err());
    }

    #[test]
    fn budgets_that_do_not_fit_are_typed_errors() {
        let t = model(6, 100);
        // The input tensors alone pass device 0's budget.
        match assign(&Placement::budgets([1009, 1 << 20]), &t) {
            Err(Error::OverBudget {
                device: 0,
                needed: 1010,
                budget: 1009,
                what,
            }) => assert_eq!(what, "the input tensors"),
            other => panic!("{other:?}"),
        }
        // The output tensors pass the last device's.
        match assign(&Placement::budgets([1 << 20, 2019]), &t) {
            Err(Error::OverBudget {
                device: 1,
                needed: 2020,
                budget: 2019,
                ..
            }) => {}
            other => panic!("{other:?}"),
        }
        // Both on one device.
        let p = Placement {
            input: 0,
            output: 0,
            ..Placement::budgets([3000, 1 << 20])
        };
        match assign(&p, &t) {
            Err(Error::OverBudget {
                device: 0,
                what,
                needed: 3030,
                ..
            }) => {
                assert_eq!(what, "the input and output tensors")
            }
            other => panic!("{other:?}"),
        }
        // Layers left over when every device is full: named on the last device, with all it
        // would have to hold; the message is one line.
        let err = assign(&Placement::budgets([1210, 2120]), &t).unwrap_err();
        match &err {
            Error::OverBudget {
                device: 1,
                needed,
                budget: 2120,
                what,
            } => {
                // Device 1 holds the output (2020) and layer 2 (100); layers 3..=5 are left.
                assert_eq!(*needed, 2120 + 300);
                assert!(what.contains("layers 3..=5"), "{what}");
            }
            other => panic!("{other:?}"),
        }
        let msg = err.to_string();
        assert!(!msg.contains('\n') && msg.contains("device 1"), "{msg}");
        assert!(err.hint().is_some());
        // Zero budgets.
        assert!(matches!(
            assign(&Placement::budgets([0, 0, 0]), &t),
            Err(Error::OverBudget { device: 0, .. })
        ));
    }

    #[test]
    fn bad_placements_are_typed_errors() {
        let t = model(2, 10);
        for p in [
            Placement::even(0),
            Placement::budgets([]),
            Placement {
                input: 3,
                ..Placement::even(3)
            },
            Placement {
                output: 2,
                ..Placement::budgets([1 << 20, 1 << 20])
            },
            Placement::proportions([1.0, -1.0]),
            Placement::proportions([f64::NAN, 1.0]),
            Placement::proportions([f64::INFINITY]),
            Placement::proportions([0.0, 0.0]),
        ] {
            let err = assign(&p, &t).unwrap_err();
            assert!(matches!(err, Error::Placement { .. }), "{p:?}: {err}");
        }
    }

    #[test]
    fn every_tensor_lands_on_exactly_one_device() {
        // Many shapes of split: `summary` checks the invariant; layers stay whole and in order.
        let t = model(13, 64);
        for n in 1..=5 {
            for p in [
                Placement::even(n),
                Placement::proportions((1..=n).map(|d| d as f64)),
                Placement::budgets(vec![1500; n - 1].into_iter().chain([1 << 30])),
            ] {
                let out = assign(&p, &t).unwrap();
                assert_eq!(out.len(), n);
                let layers: Vec<u64> = layers_of(&t, &out).concat();
                assert_eq!(layers, (0..13).collect::<Vec<_>>(), "{p:?}");
            }
        }
        // The empty selection.
        assert_eq!(
            Placement::even(2).assign_sizes(&[]).unwrap(),
            [Vec::<usize>::new(), Vec::new()]
        );
    }

    #[test]
    fn assign_reads_sizes_from_the_file() {
        use crate::gguf::GgufWriter;
        use crate::{DType, Format};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("placement.gguf");
        let mut w = GgufWriter::new();
        // Q8_0: 34 bytes per 32 values. token_embd 4 blocks, layers 2 blocks each, output 1.
        w.tensor("token_embd.weight", vec![128], Format::Q8_0, vec![0; 136]);
        for l in 0..3 {
            w.tensor(format!("blk.{l}.a"), vec![64], Format::Q8_0, vec![0; 68]);
        }
        w.tensor("output.weight", vec![32], Format::Q8_0, vec![0; 34]);
        std::fs::write(&path, w.to_bytes()).unwrap();
        let file = GgufFile::open(&path).unwrap();
        // Raw: input 136 + 2 layers of 68 fit 280 on device 0.
        let p = Placement::budgets([280, 1000]);
        let out = p.assign(&file, &Selection::All, Residency::Raw).unwrap();
        assert_eq!(out, [vec![0, 1, 2], vec![3, 4]]);
        // As f32 (4 bytes a value): input 512, layers 256; only the input fits.
        let out = Placement::budgets([700, 2000])
            .assign(&file, &Selection::All, Residency::Dequantised(DType::F32))
            .unwrap();
        assert_eq!(out, [vec![0], vec![1, 2, 3, 4]]);
        // Indices are into the whole file when a selection picks a few.
        let out = Placement::even(2)
            .assign(&file, &Selection::glob(["blk.*"]), Residency::Raw)
            .unwrap();
        assert_eq!(out, [vec![1, 2], vec![3]]);
    }
}
