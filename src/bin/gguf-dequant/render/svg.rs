//! `bench`'s chart: GB/s per format and adapter as an SVG file.

use std::path::Path;

use gguf_dequant::bench::BenchReport;
use gguf_dequant::{DType, Format};
use plotters::prelude::*;

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

/// Draws GB/s per format, one bar per adapter (and the CPU on all threads), with each adapter's
/// copy bandwidth as a dashed line; one panel per dtype. SVG, text left to the viewer's fonts (no
/// font files needed to render).
pub fn write_svg(report: &BenchReport, path: &Path) -> anyhow::Result<()> {
    draw(report, path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

fn draw(report: &BenchReport, path: &Path) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let mut dtypes: Vec<DType> = Vec::new();
    let mut formats: Vec<Format> = Vec::new();
    for r in report.results.iter().filter(|r| r.gpu.is_some()) {
        if !dtypes.contains(&r.dtype) {
            dtypes.push(r.dtype);
        }
        if !formats.contains(&r.format) {
            formats.push(r.format);
        }
    }
    if dtypes.is_empty() {
        return Err("no GPU results to draw".into());
    }
    let panel_h = 420u32;
    let width = (220 + 70 * formats.len() as u32).max(900);
    let root = SVGBackend::new(path, (width, panel_h * dtypes.len() as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((dtypes.len(), 1));
    let n_bars = report.adapters.len() + 1;
    for (panel, &dtype) in panels.iter().zip(&dtypes) {
        let rows = |f: Format, a: Option<usize>| {
            report
                .results
                .iter()
                .find(|r| r.format == f && r.dtype == dtype && (a.is_none() || r.adapter == a))
        };
        // Log scale: on a software adapter the copy runs ~50x faster than any shader, and a
        // linear axis would flatten every bar.
        let (mut y_min, mut y_max) = (f64::INFINITY, 0f64);
        for r in report.results.iter().filter(|r| r.dtype == dtype) {
            for v in [r.gb_per_s(), r.copy_gb_per_s(), r.cpu_mt_gb_per_s]
                .into_iter()
                .flatten()
            {
                if v.is_finite() && v > 0.0 {
                    y_min = y_min.min(v);
                    y_max = y_max.max(v);
                }
            }
        }
        if y_max <= 0.0 {
            (y_min, y_max) = (0.1, 1.0);
        }
        let (y_min, y_max) = (y_min / 2.0, y_max * 2.0);
        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!(
                    "gguf-dequant: dequantisation to {dtype}, GB/s of (quantised in + {dtype} out), log scale; dashed: copy of the same traffic"
                ),
                ("sans-serif", 16),
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
        // Format names under each group.
        chart.draw_series(formats.iter().enumerate().map(|(i, f)| {
            EmptyElement::at((i as f64 + 0.5, y_min))
                + Text::new(
                    f.name().to_string(),
                    (-(f.name().len() as i32) * 3, 8),
                    ("sans-serif", 12).into_font(),
                )
        }))?;
        let bar_w = 0.8 / n_bars as f64;
        for (a, adapter) in report.adapters.iter().enumerate() {
            let colour = PALETTE[a % PALETTE.len()];
            chart
                .draw_series(formats.iter().enumerate().filter_map(|(i, &f)| {
                    let v = rows(f, Some(a))?.gb_per_s()?;
                    let x0 = i as f64 + 0.1 + a as f64 * bar_w;
                    Some(Rectangle::new(
                        [(x0, y_min), (x0 + bar_w, v)],
                        colour.filled(),
                    ))
                }))?
                .label(format!("{} ({})", adapter.name, adapter.backend))
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled())
                });
            let copy: Vec<(f64, f64)> = formats
                .iter()
                .enumerate()
                .filter_map(|(i, &f)| Some((i as f64 + 0.5, rows(f, Some(a))?.copy_gb_per_s()?)))
                .collect();
            chart
                .draw_series(DashedLineSeries::new(copy, 6, 4, colour.stroke_width(2)))?
                .label(format!("copy, {} ({})", adapter.name, adapter.backend))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 12, y)], colour.stroke_width(2))
                });
        }
        let a = report.adapters.len();
        chart
            .draw_series(formats.iter().enumerate().filter_map(|(i, &f)| {
                let v = rows(f, None)?.cpu_mt_gb_per_s?;
                let x0 = i as f64 + 0.1 + a as f64 * bar_w;
                Some(Rectangle::new(
                    [(x0, y_min), (x0 + bar_w, v)],
                    CPU_COLOUR.filled(),
                ))
            }))?
            .label(format!("CPU codecs, {} threads", report.cpu_threads))
            .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], CPU_COLOUR.filled()));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 12))
            .draw()?;
    }
    root.present()?;
    Ok(())
}
