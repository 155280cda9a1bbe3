//! `bench`'s chart: GB/s per format and adapter, with both rooflines, as an SVG file, and below
//! them one panel per inference kernel (matvec and get_rows GB/s with the rooflines, matmul
//! GFLOPS). It draws JSON reports ([`super::bench::Report`]): one run's, or several for
//! `--compare`.

use std::path::Path;

use plotters::element::DashedPathElement;
use plotters::prelude::*;

use gguf_dequant::gpu::kernels::Op;

use super::bench::{adapter_label, gpu_pairs, kernel_keys, several_hosts, KernelRow, Report, Row};

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(188, 189, 34),
];
const CPU_COLOUR: RGBColor = RGBColor(127, 127, 127);
const LEGEND_W: u32 = 360;

/// One set of bars: an adapter of a report (with its rooflines), or a report's CPU codecs.
struct Series<'a> {
    label: String,
    colour: RGBColor,
    rows: Vec<&'a Row>,
    kernels: Vec<&'a KernelRow>,
    cpu: bool,
}

impl Series<'_> {
    fn row(&self, format: &str, dtype: &str) -> Option<&Row> {
        self.rows
            .iter()
            .copied()
            .find(|r| r.format == format && r.dtype == dtype)
    }

    fn bar(&self, format: &str, dtype: &str) -> Option<f64> {
        let r = self.row(format, dtype)?;
        if self.cpu {
            r.cpu_mt_gb_per_s
        } else {
            r.gb_per_s
        }
    }
}

type KernelKey = (String, String, u64, u64, u32);

/// The kernel row of `s` with `key` (a matmul key's batch 0 matches any batch).
fn row<'a>(s: &Series<'a>, key: &KernelKey) -> Option<&'a KernelRow> {
    s.kernels.iter().copied().find(|r| {
        r.format == key.0
            && r.kernel == key.1
            && (r.k, r.n) == (key.2, key.3)
            && (key.4 == 0 || r.batch == key.4)
    })
}

fn series(reports: &[(String, Report)]) -> Vec<Series<'_>> {
    let hosts = several_hosts(reports);
    let mut out = Vec::new();
    for (_, r) in reports {
        for (i, a) in r.adapters.iter().enumerate() {
            out.push(Series {
                label: adapter_label(r, a, hosts),
                colour: PALETTE[out.len() % PALETTE.len()],
                rows: r.results.iter().filter(|x| x.adapter == Some(i)).collect(),
                kernels: r.kernels.iter().filter(|x| x.adapter == i).collect(),
                cpu: false,
            });
        }
    }
    for (_, r) in reports {
        // The CPU figures repeat on every adapter's rows; the first adapter's (or the CPU-only
        // rows) stand for them.
        let rows: Vec<&Row> = r
            .results
            .iter()
            .filter(|x| x.adapter.unwrap_or(0) == 0 && x.cpu_mt_gb_per_s.is_some())
            .collect();
        if !rows.is_empty() {
            let host = match (&r.host, hosts) {
                (Some(h), true) => format!(" @ {h}"),
                _ => String::new(),
            };
            out.push(Series {
                label: format!("CPU codecs, {} threads{host}", r.cpu_threads),
                colour: CPU_COLOUR,
                rows,
                kernels: Vec::new(),
                cpu: true,
            });
        }
    }
    out
}

/// Draws GB/s per format, one bar per adapter (and per report's CPU codecs on all threads), with
/// each adapter's buffer-copy roofline dashed and its shader-copy roofline solid; one panel
/// per dtype, the legend beside them. SVG, text left to the viewer's fonts.
pub fn write_svg(reports: &[(String, Report)], path: &Path) -> anyhow::Result<()> {
    draw(reports, path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

type DrawResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

fn draw(reports: &[(String, Report)], path: &Path) -> DrawResult {
    let pairs = gpu_pairs(reports);
    let mut dtypes: Vec<&str> = Vec::new();
    let mut formats: Vec<&str> = Vec::new();
    for (f, d) in &pairs {
        if !dtypes.contains(&d.as_str()) {
            dtypes.push(d);
        }
        if !formats.contains(&f.as_str()) {
            formats.push(f);
        }
    }
    let all: Vec<&Report> = reports.iter().map(|(_, r)| r).collect();
    let keys = kernel_keys(&all);
    let ops: Vec<Op> = Op::ALL
        .iter()
        .copied()
        .filter(|op| keys.iter().any(|k| k.1 == op.name()))
        .collect();
    if dtypes.is_empty() && ops.is_empty() {
        return Err("no GPU results to draw".into());
    }
    let series = series(reports);
    let panel_h = 440u32;
    let most_keys = ops
        .iter()
        .map(|op| keys.iter().filter(|k| k.1 == op.name()).count())
        .max()
        .unwrap_or(0) as u32;
    let width = (220 + 70 * formats.len() as u32)
        .max(220 + 110 * most_keys)
        .max(900)
        + LEGEND_W;
    let n_panels = (dtypes.len() + ops.len()) as u32;
    let root = SVGBackend::new(path, (width, panel_h * n_panels)).into_drawing_area();
    root.fill(&WHITE)?;
    let (plots, legend) = root.split_horizontally(width - LEGEND_W);
    let panels = plots.split_evenly((n_panels as usize, 1));
    let bar_w = 0.8 / series.len().max(1) as f64;
    let gpu_series: Vec<&Series<'_>> = series.iter().filter(|s| !s.cpu).collect();
    for (panel, &op) in panels[dtypes.len()..].iter().zip(&ops) {
        let keys: Vec<_> = keys.iter().filter(|k| k.1 == op.name()).collect();
        // Only the adapters with rows of this kernel get a bar slot.
        let gpu_series: Vec<&Series<'_>> = gpu_series
            .iter()
            .copied()
            .filter(|s| keys.iter().any(|k| row(s, k).is_some()))
            .collect();
        let bar = |r: &KernelRow| {
            if op.bandwidth_bound() {
                r.gb_per_s
            } else {
                r.gflops
            }
        };
        let unfused = |r: &KernelRow| {
            r.unfused_seconds
                .filter(|&t| t > 0.0)
                .map(|t| r.weight_bytes as f64 / t / 1e9)
        };
        let (y_min, y_max) = log_range(gpu_series.iter().flat_map(|s| {
            keys.iter().filter_map(|key| row(s, key)).flat_map(|r| {
                if op.bandwidth_bound() {
                    vec![
                        r.gb_per_s,
                        r.copy_gb_per_s,
                        r.shader_copy_gb_per_s,
                        unfused(r),
                    ]
                } else {
                    vec![r.gflops]
                }
            })
        }));
        let caption = match op {
            Op::MatVec => "matvec: GB/s of weights read, log scale; dashed: buffer copy, solid: \
                 shader copy; circle: dequantise to f16 + f16 matvec"
                .to_string(),
            Op::MatMul => "matmul: GFLOPS (2·K·N·batch / time), log scale".to_string(),
            Op::GetRows => "get_rows: GB/s of (rows read + f32 written), log scale; dashed: \
                 buffer copy, solid: shader copy"
                .to_string(),
            Op::MatVecId => "matvec_id: GB/s of the experts' weights read, log scale; dashed: \
                 buffer copy, solid: shader copy"
                .to_string(),
        };
        let mut chart = ChartBuilder::on(panel)
            .caption(caption, ("sans-serif", 15))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..keys.len() as f64, (y_min..y_max).log_scale())?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc(if op.bandwidth_bound() {
                "GB/s"
            } else {
                "GFLOPS"
            })
            .draw()?;
        chart.draw_series(keys.iter().enumerate().map(|(i, k)| {
            let line2 = if k.4 == 0 {
                format!("{}x{}", k.2, k.3)
            } else {
                format!("{}x{} ×{}", k.2, k.3, k.4)
            };
            EmptyElement::at((i as f64 + 0.5, y_min))
                + Text::new(
                    k.0.clone(),
                    (-(k.0.len() as i32) * 3, 6),
                    ("sans-serif", 12).into_font(),
                )
                + Text::new(
                    line2.clone(),
                    (-(line2.chars().count() as i32) * 3, 20),
                    ("sans-serif", 11).into_font(),
                )
        }))?;
        let bar_w = 0.8 / gpu_series.len().max(1) as f64;
        for (j, s) in gpu_series.iter().enumerate() {
            chart.draw_series(keys.iter().enumerate().filter_map(|(i, key)| {
                let v = bar(row(s, key)?)?;
                let x0 = i as f64 + 0.1 + j as f64 * bar_w;
                Some(Rectangle::new(
                    [(x0, y_min), (x0 + bar_w, v)],
                    s.colour.filled(),
                ))
            }))?;
            chart.draw_series(keys.iter().enumerate().filter_map(|(i, key)| {
                let v = unfused(row(s, key)?)?;
                let x = i as f64 + 0.1 + (j as f64 + 0.5) * bar_w;
                Some(Circle::new((x, v), 5, BLACK.stroke_width(2)))
            }))?;
        }
        if op.bandwidth_bound() {
            for s in &gpu_series {
                for (i, key) in keys.iter().enumerate() {
                    let Some(r) = row(s, key) else { continue };
                    let (x0, x1) = (i as f64 + 0.05, i as f64 + 0.95);
                    let style = s.colour.stroke_width(2);
                    if let Some(v) = r.copy_gb_per_s {
                        chart.draw_series(DashedLineSeries::new(
                            [(x0, v), (x1, v)],
                            8,
                            4,
                            style,
                        ))?;
                    }
                    if let Some(v) = r.shader_copy_gb_per_s {
                        chart.draw_series(LineSeries::new([(x0, v), (x1, v)], style))?;
                    }
                }
            }
        }
    }
    for (panel, &dtype) in panels.iter().zip(&dtypes) {
        // Log scale: on a software adapter the buffer copy runs ~50x faster than any shader,
        // and a linear axis would flatten every bar.
        let (y_min, y_max) = log_range(series.iter().flat_map(|s| {
            s.rows.iter().filter(|r| r.dtype == dtype).flat_map(|r| {
                if s.cpu {
                    vec![r.cpu_mt_gb_per_s]
                } else {
                    vec![r.gb_per_s, r.copy_gb_per_s, r.shader_copy_gb_per_s]
                }
            })
        }));
        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!(
                    "dequantisation to {dtype}: GB/s of (quantised in + {dtype} out), log scale; \
                     dashed: buffer copy, solid: shader copy of the same traffic"
                ),
                ("sans-serif", 15),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..formats.len() as f64, (y_min..y_max).log_scale())?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc("GB/s")
            .draw()?;
        chart.draw_series(formats.iter().enumerate().map(|(i, f)| {
            EmptyElement::at((i as f64 + 0.5, y_min))
                + Text::new(
                    f.to_string(),
                    (-(f.len() as i32) * 3, 8),
                    ("sans-serif", 12).into_font(),
                )
        }))?;
        for (k, s) in series.iter().enumerate() {
            chart.draw_series(formats.iter().enumerate().filter_map(|(i, &f)| {
                let v = s.bar(f, dtype)?;
                let x0 = i as f64 + 0.1 + k as f64 * bar_w;
                Some(Rectangle::new(
                    [(x0, y_min), (x0 + bar_w, v)],
                    s.colour.filled(),
                ))
            }))?;
        }
        // Each adapter's rooflines over each format's group of bars, on top of the bars.
        for s in series.iter().filter(|s| !s.cpu) {
            for (i, &f) in formats.iter().enumerate() {
                let Some(r) = s.row(f, dtype) else { continue };
                let (x0, x1) = (i as f64 + 0.05, i as f64 + 0.95);
                let style = s.colour.stroke_width(2);
                if let Some(v) = r.copy_gb_per_s {
                    chart.draw_series(DashedLineSeries::new([(x0, v), (x1, v)], 8, 4, style))?;
                }
                if let Some(v) = r.shader_copy_gb_per_s {
                    chart.draw_series(LineSeries::new([(x0, v), (x1, v)], style))?;
                }
            }
        }
    }
    // The legend: one line per bar series, and the two roofline styles per adapter.
    let font = ("sans-serif", 13).into_font();
    let mut y = 40;
    for s in &series {
        legend.draw(&Rectangle::new(
            [(10, y - 6), (26, y + 6)],
            s.colour.filled(),
        ))?;
        legend.draw(&Text::new(s.label.clone(), (34, y - 7), font.clone()))?;
        y += 20;
        if !s.cpu {
            let style = s.colour.stroke_width(2);
            legend.draw(&DashedPathElement::new(vec![(10, y), (26, y)], 8, 4, style))?;
            legend.draw(&Text::new(
                "buffer copy (copy_buffer_to_buffer)",
                (34, y - 7),
                font.clone(),
            ))?;
            y += 18;
            legend.draw(&PathElement::new(vec![(10, y), (26, y)], style))?;
            legend.draw(&Text::new(
                "shader copy (streaming kernel)",
                (34, y - 7),
                font.clone(),
            ))?;
            y += 24;
        }
    }
    if ops.contains(&Op::MatVec) {
        legend.draw(&Circle::new((18, y), 5, BLACK.stroke_width(2)))?;
        legend.draw(&Text::new(
            "matvec unfused: dequantise to f16 + f16 matvec",
            (34, y - 7),
            font.clone(),
        ))?;
    }
    root.present()?;
    Ok(())
}

/// The y range of a log-scale panel: the finite positive `values`, widened by 2× each way
/// (0.05 to 2 when there are none).
fn log_range(values: impl Iterator<Item = Option<f64>>) -> (f64, f64) {
    let (mut y_min, mut y_max) = (f64::INFINITY, 0f64);
    for v in values.flatten().filter(|v| v.is_finite() && *v > 0.0) {
        y_min = y_min.min(v);
        y_max = y_max.max(v);
    }
    if y_max <= 0.0 {
        (y_min, y_max) = (0.1, 1.0);
    }
    (y_min / 2.0, y_max * 2.0)
}
