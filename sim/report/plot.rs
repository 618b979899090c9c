//! Figures, drawn with plotters: SVG by default, PNG on request, with the DejaVu Sans font
//! embedded (the `dejavu` crate), so text renders the same on a fresh machine with no fonts
//! installed and the bytes are the same on every run.
//!
//! - [`tornado`]: one-at-a-time effects, a bar per factor from its most negative to its most
//!   positive effect, largest range on top;
//! - [`scatter`]: Morris μ* against σ, one labelled point per factor;
//! - [`sobol_bars`]: S1 and ST per factor with their 95% intervals;
//! - [`heatmap`]: a response over two factors' levels;
//! - [`curves`]: a metric per round, one line per series with its 95% band;
//! - [`cdf`]: empirical CDFs (from a run's time-to-exposure deciles);
//! - [`grouped_bars`]: a metric per topology, a bar per arm with its spread.

use crate::error::{Error, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

/// Output format.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Format {
    /// Scalable vector graphics.
    Svg,
    /// Portable network graphics.
    Png,
}

impl Format {
    /// From a file name's extension (`.png` → PNG, else SVG).
    pub fn of(path: &Path) -> Format {
        if path.extension().is_some_and(|e| e == "png") { Format::Png } else { Format::Svg }
    }
}

fn fonts() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Registering a valid embedded TTF cannot fail; a failure would only drop the text.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular());
        let _ = plotters::style::register_font("sans-serif", FontStyle::Bold, dejavu::sans::bold());
    });
}

fn draw_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Write { path: path.to_path_buf(), source: std::io::Error::other(e.to_string()) }
}

/// A figure's body on the SVG backend.
pub(crate) type SvgBody<'a> = dyn Fn(&DrawingArea<SVGBackend<'_>, Shift>) -> std::result::Result<(), String> + 'a;
/// A figure's body on the bitmap backend.
pub(crate) type PngBody<'a> = dyn Fn(&DrawingArea<BitMapBackend<'_>, Shift>) -> std::result::Result<(), String> + 'a;

/// Draws with `f` onto a `w`×`h` canvas written to `path` in its format.
pub(crate) fn canvas(path: &Path, (w, h): (u32, u32), f: &SvgBody<'_>, g: &PngBody<'_>) -> Result<()> {
    fonts();
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(|source| Error::Write { path: d.to_path_buf(), source })?;
    }
    // Draw into a temporary file, then rename: a figure is never half-written.
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("svg");
    let stem = path.file_stem().and_then(|e| e.to_str()).unwrap_or("figure");
    // A unique name (two writers never share one), removed if drawing fails. Readable by
    // others as every other output is (`files::write_atomic`): tempfile creates 0600, and the
    // rename keeps the temporary's mode.
    use std::os::unix::fs::PermissionsExt;
    let tmp_file = tempfile::Builder::new()
        .prefix(&format!(".{stem}."))
        .suffix(&format!(".tmp.{ext}"))
        .permissions(std::fs::Permissions::from_mode(0o644))
        .tempfile_in(path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new(".")))
        .map_err(|source| Error::Write { path: path.to_path_buf(), source })?;
    let tmp = tmp_file.path().to_path_buf();
    match Format::of(path) {
        Format::Svg => {
            let root = SVGBackend::new(&tmp, (w, h)).into_drawing_area();
            root.fill(&WHITE).map_err(|e| draw_err(path, e))?;
            f(&root).map_err(|e| draw_err(path, e))?;
            root.present().map_err(|e| draw_err(path, e))?;
        }
        Format::Png => {
            let root = BitMapBackend::new(&tmp, (w, h)).into_drawing_area();
            root.fill(&WHITE).map_err(|e| draw_err(path, e))?;
            g(&root).map_err(|e| draw_err(path, e))?;
            root.present().map_err(|e| draw_err(path, e))?;
        }
    }
    tmp_file.persist(path).map_err(|e| Error::Write { path: path.to_path_buf(), source: e.error })?;
    Ok(())
}

/// One bar of a tornado: a label and the effects at the low and high ends.
#[derive(Clone, Debug, PartialEq)]
pub struct TornadoBar {
    /// Factor.
    pub label: String,
    /// Effect of the lowest step (e.g. ×0.8), with its 95% interval.
    pub low: (f64, f64, f64),
    /// Effect of the highest step (e.g. ×1.2), with its 95% interval.
    pub high: (f64, f64, f64),
}

const BLUE: RGBColor = RGBColor(44, 110, 180);
const ORANGE: RGBColor = RGBColor(222, 120, 40);
const GREY: RGBColor = RGBColor(90, 90, 90);

/// Draws one body on either backend: the closure is written once and typed twice.
macro_rules! both {
    ($path:expr, $size:expr, |$root:ident| $body:block) => {
        canvas(
            $path,
            $size,
            &|$root: &DrawingArea<SVGBackend<'_>, Shift>| -> std::result::Result<(), String> { $body },
            &|$root: &DrawingArea<BitMapBackend<'_>, Shift>| -> std::result::Result<(), String> { $body },
        )
    };
}
pub(crate) use both;

/// A tornado chart: factors sorted by the span of their effects, largest on top; the low step's
/// bar in blue, the high step's in orange, each with its 95% interval.
pub fn tornado(
    path: &Path,
    title: &str,
    x_label: &str,
    low_name: &str,
    high_name: &str,
    bars: &[TornadoBar],
) -> Result<()> {
    let mut bars = bars.to_vec();
    let span = |b: &TornadoBar| (b.high.0 - b.low.0).abs().max(b.low.0.abs()).max(b.high.0.abs());
    bars.sort_by(|a, b| span(b).total_cmp(&span(a)).then(a.label.cmp(&b.label)));
    let n = bars.len().max(1);
    let lim =
        bars.iter().flat_map(|b| [b.low.1, b.low.2, b.high.1, b.high.2]).fold(0.5f64, |m, x| m.max(x.abs())) * 1.1;
    let height = 120 + 26 * n as u32;
    let all_zero = bars.iter().all(|b| b.low.0 == 0.0 && b.high.0 == 0.0);
    both!(path, (840, height + 30), |whole| {
        let (root, legend) = whole.split_vertically(height);
        let caption = if all_zero { format!("{title}: no factor moved it") } else { title.to_string() };
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(240)
            .build_cartesian_2d(-lim..lim, 0f64..n as f64)
            .map_err(|e| e.to_string())?;
        // Ticks read "0.0", never "-0.0".
        let tick = |v: &f64| {
            let t = format!("{v:.1}");
            if t == "-0.0" { "0.0".to_string() } else { t }
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_desc(x_label)
            .x_label_formatter(&tick)
            .y_labels(0)
            .draw()
            .map_err(|e| e.to_string())?;
        let right = ("sans-serif", 12).into_font().into_text_style(&root).pos(Pos::new(HPos::Right, VPos::Center));
        for (k, b) in bars.iter().enumerate() {
            let (px, py) = chart.backend_coord(&(-lim, n as f64 - k as f64 - 0.5));
            root.draw(&Text::new(b.label.clone(), (px - 8, py), right.clone())).map_err(|e| e.to_string())?;
        }
        let zero = ("sans-serif", 11).into_font().color(&GREY).pos(Pos::new(HPos::Left, VPos::Center));
        for (k, b) in bars.iter().enumerate() {
            let y = n as f64 - k as f64 - 0.5;
            for (v, color, dy) in [(b.low, BLUE, 0.18), (b.high, ORANGE, -0.18)] {
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(0.0, y + dy - 0.15), (v.0, y + dy + 0.15)],
                        color.mix(0.85).filled(),
                    )))
                    .map_err(|e| e.to_string())?;
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(v.1, y + dy), (v.2, y + dy)],
                        GREY.stroke_width(1),
                    )))
                    .map_err(|e| e.to_string())?;
            }
            // A factor whose steps moved nothing says so, so it cannot pass for a missing bar.
            if b.low.0 == 0.0 && b.high.0 == 0.0 {
                chart
                    .draw_series(std::iter::once(Text::new("0 (no effect)", (lim * 0.02, y), zero.clone())))
                    .map_err(|e| e.to_string())?;
            }
        }
        chart
            .draw_series(std::iter::once(PathElement::new(vec![(0.0, 0.0), (0.0, n as f64)], BLACK.stroke_width(1))))
            .map_err(|e| e.to_string())?;
        // The legend is a strip below the chart, off the title and the data.
        for (k, (name, color)) in [(low_name, BLUE), (high_name, ORANGE)].into_iter().enumerate() {
            let x = 250 + 90 * k as i32;
            legend.draw(&Rectangle::new([(x, 6), (x + 14, 18)], color.filled())).map_err(|e| e.to_string())?;
            legend
                .draw(&Text::new(format!("{name} nominal"), (x + 18, 5), ("sans-serif", 12)))
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    })
}

/// Morris μ* (x) against σ (y), a labelled point per factor.
pub fn scatter(path: &Path, title: &str, x_label: &str, y_label: &str, points: &[(String, f64, f64)]) -> Result<()> {
    let xmax = points.iter().map(|p| p.1).fold(0.0f64, f64::max).max(1e-9) * 1.25;
    let ymax = points.iter().map(|p| p.2).fold(0.0f64, f64::max).max(1e-9) * 1.25;
    both!(path, (760, 560), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..xmax, 0f64..ymax)
            .map_err(|e| e.to_string())?;
        chart.configure_mesh().x_desc(x_label).y_desc(y_label).draw().map_err(|e| e.to_string())?;
        // σ = μ* marks where interactions or non-linearity dominate; the line says so.
        let end = xmax.min(ymax);
        chart.draw_series(LineSeries::new(vec![(0.0, 0.0), (end, end)], GREY.mix(0.6))).map_err(|e| e.to_string())?;
        chart
            .draw_series(std::iter::once(Text::new(
                "σ = μ*",
                (end * 0.92, end * 0.97),
                ("sans-serif", 11).into_font().color(&GREY).pos(Pos::new(HPos::Right, VPos::Bottom)),
            )))
            .map_err(|e| e.to_string())?;
        // Factors with no effect at all sit on one point: one label names how many, instead of
        // a pile of labels on top of each other.
        let at_origin: Vec<&String> = points.iter().filter(|p| p.1 == 0.0 && p.2 == 0.0).map(|p| &p.0).collect();
        for (label, x, y) in points {
            chart.draw_series(std::iter::once(Circle::new((*x, *y), 4, BLUE.filled()))).map_err(|e| e.to_string())?;
            if *x == 0.0 && *y == 0.0 && at_origin.len() > 1 {
                continue;
            }
            chart
                .draw_series(std::iter::once(Text::new(
                    label.clone(),
                    (*x + xmax * 0.01, *y + ymax * 0.01),
                    ("sans-serif", 11),
                )))
                .map_err(|e| e.to_string())?;
        }
        if at_origin.len() > 1 {
            chart
                .draw_series(std::iter::once(Text::new(
                    format!("{} factors with no effect (μ* = σ = 0; listed in the summary)", at_origin.len()),
                    (xmax * 0.02, ymax * 0.03),
                    ("sans-serif", 11),
                )))
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    })
}

/// One factor's Sobol indices: (label, S1, S1 interval, ST, ST interval).
pub type SobolBar = (String, f64, (f64, f64), f64, (f64, f64));

/// S1 (blue) and ST (orange) per factor with their 95% intervals.
pub fn sobol_bars(path: &Path, title: &str, bars: &[SobolBar]) -> Result<()> {
    let n = bars.len().max(1);
    let ymax = bars.iter().flat_map(|b| [b.2.1, b.4.1, b.1, b.3]).fold(0.1f64, f64::max).min(1.5) * 1.1;
    let ymin = bars.iter().flat_map(|b| [b.2.0, b.4.0]).fold(0.0f64, f64::min).max(-0.5);
    both!(path, (160 + 90 * n as u32, 520 + 30), |whole| {
        let (root, legend) = whole.split_vertically(520);
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(70)
            .y_label_area_size(50)
            .build_cartesian_2d(0f64..n as f64, ymin..ymax)
            .map_err(|e| e.to_string())?;
        chart.configure_mesh().disable_x_mesh().y_desc("index").x_labels(0).draw().map_err(|e| e.to_string())?;
        let below = ("sans-serif", 12).into_font().into_text_style(&root).pos(Pos::new(HPos::Center, VPos::Top));
        for (k, b) in bars.iter().enumerate() {
            let (px, py) = chart.backend_coord(&(k as f64 + 0.5, ymin));
            root.draw(&Text::new(b.0.clone(), (px, py + 6), below.clone())).map_err(|e| e.to_string())?;
        }
        for (k, b) in bars.iter().enumerate() {
            let x = k as f64;
            for (v, ci, color, dx) in [(b.1, b.2, BLUE, 0.15), (b.3, b.4, ORANGE, 0.5)] {
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(x + dx, 0.0), (x + dx + 0.3, v)],
                        color.mix(0.85).filled(),
                    )))
                    .map_err(|e| e.to_string())?;
                let c = x + dx + 0.15;
                chart
                    .draw_series(std::iter::once(PathElement::new(vec![(c, ci.0), (c, ci.1)], BLACK.stroke_width(1))))
                    .map_err(|e| e.to_string())?;
                // An index too small to see says its value ("0" when exactly zero).
                if v.abs() < 0.01 * (ymax - ymin) {
                    let text = if v == 0.0 { "0".to_string() } else { format!("{v:.3}") };
                    chart
                        .draw_series(std::iter::once(Text::new(
                            text,
                            (c, 0.0),
                            ("sans-serif", 11).into_font().color(&color).pos(Pos::new(HPos::Center, VPos::Bottom)),
                        )))
                        .map_err(|e| e.to_string())?;
                }
            }
        }
        // The legend is a strip below the chart: a whisker can no longer run through it.
        for (k, (name, color)) in [("S1 first order", BLUE), ("ST total", ORANGE)].into_iter().enumerate() {
            let x = 60 + 140 * k as i32;
            legend.draw(&Rectangle::new([(x, 6), (x + 14, 18)], color.filled())).map_err(|e| e.to_string())?;
            legend.draw(&Text::new(name, (x + 18, 5), ("sans-serif", 12))).map_err(|e| e.to_string())?;
        }
        Ok(())
    })
}

/// A heatmap of `values[y][x]` with the cell value printed in each cell.
pub fn heatmap(
    path: &Path,
    title: &str,
    x: (&str, &[String]),
    y: (&str, &[String]),
    values: &[Vec<f64>],
) -> Result<()> {
    let (nx, ny) = (x.1.len().max(1), y.1.len().max(1));
    let (lo, hi) = values.iter().flatten().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(*v), b.max(*v)));
    both!(path, (160 + 80 * nx as u32, 140 + 50 * ny as u32), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..nx as f64, 0f64..ny as f64)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc(x.0)
            .y_desc(y.0)
            .x_labels(0)
            .y_labels(0)
            .draw()
            .map_err(|e| e.to_string())?;
        axis_labels(root, &chart, x.1, y.1)?;
        for (j, row) in values.iter().enumerate() {
            for (i, v) in row.iter().enumerate() {
                let t = if hi > lo { (v - lo) / (hi - lo) } else { 0.5 };
                let color = RGBColor((255.0 - 200.0 * t) as u8, (245.0 - 140.0 * t) as u8, (235.0 - 60.0 * t) as u8);
                let (x0, y0) = (i as f64, j as f64);
                chart
                    .draw_series(std::iter::once(Rectangle::new([(x0, y0), (x0 + 1.0, y0 + 1.0)], color.filled())))
                    .map_err(|e| e.to_string())?;
                chart
                    .draw_series(std::iter::once(Text::new(
                        format!("{v:.1}"),
                        (x0 + 0.35, y0 + 0.6),
                        ("sans-serif", 12),
                    )))
                    .map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    })
}

/// Category labels centred under (x) and left of (y) unit-wide cells of a chart.
fn axis_labels<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &ChartContext<
        '_,
        DB,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    xs: &[String],
    ys: &[String],
) -> std::result::Result<(), String> {
    let below = ("sans-serif", 12).into_font().into_text_style(root).pos(Pos::new(HPos::Center, VPos::Top));
    let left = ("sans-serif", 12).into_font().into_text_style(root).pos(Pos::new(HPos::Right, VPos::Center));
    let (x_range, y_range) = (chart.x_range(), chart.y_range());
    for (i, l) in xs.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(i as f64 + 0.5, y_range.start));
        root.draw(&Text::new(l.clone(), (px, py + 6), below.clone())).map_err(|e| e.to_string())?;
    }
    for (j, l) in ys.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(x_range.start, j as f64 + 0.5));
        root.draw(&Text::new(l.clone(), (px - 6, py), left.clone())).map_err(|e| e.to_string())?;
    }
    Ok(())
}

const PALETTE: [RGBColor; 10] = [
    RGBColor(44, 110, 180),
    RGBColor(222, 120, 40),
    RGBColor(60, 160, 80),
    RGBColor(190, 50, 60),
    RGBColor(130, 90, 180),
    RGBColor(140, 100, 70),
    RGBColor(210, 110, 170),
    RGBColor(110, 110, 110),
    RGBColor(180, 180, 40),
    RGBColor(30, 180, 190),
];

/// One series of a per-round plot: label, and per round (round, mean, lo, hi).
pub type Curve = (String, Vec<(f64, f64, f64, f64)>);

/// A metric per round with 95% bands.
pub fn curves(path: &Path, title: &str, y_label: &str, series: &[Curve]) -> Result<()> {
    let xmax = series.iter().flat_map(|s| s.1.iter().map(|p| p.0)).fold(1.0f64, f64::max);
    let ymax = series.iter().flat_map(|s| s.1.iter().map(|p| p.3)).fold(1.0f64, f64::max);
    both!(path, (760, 480), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(55)
            .build_cartesian_2d(0.8f64..xmax + 0.2, 0f64..ymax * 1.05)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("round")
            .y_desc(y_label)
            .x_labels(xmax as usize)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .draw()
            .map_err(|e| e.to_string())?;
        for (k, (label, pts)) in series.iter().enumerate() {
            let c = PALETTE[k % PALETTE.len()];
            let mut band: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, p.3)).collect();
            band.extend(pts.iter().rev().map(|p| (p.0, p.2)));
            chart.draw_series(std::iter::once(Polygon::new(band, c.mix(0.18).filled()))).map_err(|e| e.to_string())?;
            chart
                .draw_series(LineSeries::new(pts.iter().map(|p| (p.0, p.1)), c.stroke_width(2)))
                .map_err(|e| e.to_string())?
                .label(label.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(GREY)
            .label_font(("sans-serif", 12))
            .draw()
            .map_err(|e| e.to_string())?;
        Ok(())
    })
}

/// Empirical CDFs: per series, sorted sample values (ticks).
pub fn cdf(path: &Path, title: &str, x_label: &str, series: &[(String, Vec<f64>)]) -> Result<()> {
    let xmax = series.iter().flat_map(|s| s.1.iter().copied()).fold(1.0f64, f64::max) * 1.05;
    both!(path, (760, 480), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(55)
            .build_cartesian_2d(0f64..xmax, 0f64..1.02)
            .map_err(|e| e.to_string())?;
        chart.configure_mesh().x_desc(x_label).y_desc("cumulative share").draw().map_err(|e| e.to_string())?;
        for (k, (label, xs)) in series.iter().enumerate() {
            let c = PALETTE[k % PALETTE.len()];
            let mut v = xs.clone();
            v.sort_by(f64::total_cmp);
            let n = v.len().max(1) as f64;
            let mut pts = vec![(0.0, 0.0)];
            for (i, x) in v.iter().enumerate() {
                pts.push((*x, i as f64 / n));
                pts.push((*x, (i + 1) as f64 / n));
            }
            chart
                .draw_series(LineSeries::new(pts, c.stroke_width(2)))
                .map_err(|e| e.to_string())?
                .label(label.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(GREY)
            .label_font(("sans-serif", 12))
            .draw()
            .map_err(|e| e.to_string())?;
        Ok(())
    })
}

/// One series of [`grouped_intervals`]: its label and, per group, (mean, low, high).
pub type IntervalSeries = (String, Vec<(f64, f64, f64)>);

/// Grouped bars: per group (a topology), a bar per series (an arm) with ± its spread.
pub fn grouped_bars(
    path: &Path,
    title: &str,
    y_label: &str,
    groups: &[String],
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<()> {
    let series: Vec<IntervalSeries> = series
        .iter()
        .map(|(l, v)| (l.clone(), v.iter().map(|(m, sd)| (*m, (m - sd).max(0.0), m + sd)).collect()))
        .collect();
    grouped_intervals(path, title, y_label, groups, &series, 1.1)
}

/// Grouped bars: per group, a bar per series at its mean with a whisker over its interval
/// (mean, low, high); the y axis runs to `headroom` times the highest whisker, and a percentage
/// axis (`%` in `y_label`) to 100 when every value fits. A bar too low to see shows its value
/// ("0" for exactly zero) and a missing one (NaN) "n/a", so neither passes for the other; the
/// legend is a strip below the chart, off the data.
pub fn grouped_intervals(
    path: &Path,
    title: &str,
    y_label: &str,
    groups: &[String],
    series: &[IntervalSeries],
    headroom: f64,
) -> Result<()> {
    let (ng, ns) = (groups.len().max(1), series.len().max(1));
    let top = series.iter().flat_map(|s| s.1.iter().map(|v| v.0.max(v.2))).fold(1.0f64, f64::max);
    let ymax = if y_label.contains('%') && top <= 100.0 { 100.0 } else { top * headroom };
    let width = 200 + 140 * ng as u32;
    both!(path, (width, 480 + 30), |whole| {
        let (root, legend) = whole.split_vertically(480);
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(55)
            .build_cartesian_2d(0f64..ng as f64, 0f64..ymax)
            .map_err(|e| e.to_string())?;
        chart.configure_mesh().disable_x_mesh().y_desc(y_label).x_labels(0).draw().map_err(|e| e.to_string())?;
        axis_labels(&root, &chart, groups, &[])?;
        let w = 0.8 / ns as f64;
        let mut x = 60i32;
        for (k, (label, vals)) in series.iter().enumerate() {
            let c = PALETTE[k % PALETTE.len()];
            for (g, (m, lo, hi)) in vals.iter().enumerate() {
                let x0 = g as f64 + 0.1 + k as f64 * w;
                chart
                    .draw_series(std::iter::once(Rectangle::new([(x0, 0.0), (x0 + w * 0.9, *m)], c.mix(0.85).filled())))
                    .map_err(|e| e.to_string())?;
                let xc = x0 + w * 0.45;
                chart
                    .draw_series(std::iter::once(PathElement::new(vec![(xc, *lo), (xc, *hi)], BLACK.stroke_width(1))))
                    .map_err(|e| e.to_string())?;
                // A bar too low to see says its value ("0" for exactly zero), and a missing
                // value says so, so that neither passes for the other.
                let tiny = match *m {
                    v if v.is_nan() => Some("n/a".to_string()),
                    0.0 => Some("0".to_string()),
                    v if v.abs() < 0.01 * ymax => Some(format!("{v:.2}")),
                    _ => None,
                };
                if let Some(text) = tiny {
                    chart
                        .draw_series(std::iter::once(Text::new(
                            text,
                            (xc, ymax * 0.01),
                            ("sans-serif", 11).into_font().color(&c).pos(Pos::new(HPos::Center, VPos::Bottom)),
                        )))
                        .map_err(|e| e.to_string())?;
                }
            }
            legend.draw(&Rectangle::new([(x, 6), (x + 12, 18)], c.filled())).map_err(|e| e.to_string())?;
            legend.draw(&Text::new(label.clone(), (x + 16, 5), ("sans-serif", 12))).map_err(|e| e.to_string())?;
            x += 16 + 7 * label.chars().count() as i32 + 24;
        }
        Ok(())
    })
}

/// One point of a trade-off plot: label, then (mean, lo, hi) of x and of y.
pub type TradeoffPoint = (String, (f64, f64, f64), (f64, f64, f64));

/// A trade-off between two metrics (the evasion-versus-success curve of an adaptive attacker):
/// per series, its points (conditions are categories, so no line joins them), each with both
/// 95% intervals as error bars and its label beside it. Both axes run 0–100 (percent).
pub fn tradeoff(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<TradeoffPoint>)],
) -> Result<()> {
    let ymax = series.iter().flat_map(|s| s.1.iter().map(|p| p.2.2)).fold(1.0f64, f64::max).min(100.0) * 1.15;
    both!(path, (820, 560), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(55)
            .build_cartesian_2d(-2f64..108f64, 0f64..ymax)
            .map_err(|e| e.to_string())?;
        chart.configure_mesh().x_desc(x_label).y_desc(y_label).draw().map_err(|e| e.to_string())?;
        for (k, (name, pts)) in series.iter().enumerate() {
            let c = PALETTE[k % PALETTE.len()];
            // The conditions are categories, not a sequence: points with their labels, no line
            // between them. An empty series carries the legend entry.
            chart
                .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
                .map_err(|e| e.to_string())?
                .label(name.clone())
                .legend(move |(x, y)| Circle::new((x + 6, y), 4, c.filled()));
            // Points that coincide share one label ("a = b"; every one: "all conditions").
            let key = |p: &TradeoffPoint| ((p.1.0 * 10.0).round() as i64, (p.2.0 * 10.0).round() as i64);
            let mut labels: Vec<(i64, i64, Vec<&str>)> = Vec::new();
            for p in pts {
                let (kx, ky) = key(p);
                match labels.iter_mut().find(|l| l.0 == kx && l.1 == ky) {
                    Some(l) => l.2.push(&p.0),
                    None => labels.push((kx, ky, vec![&p.0])),
                }
            }
            let mut drawn = 0;
            for (label, x, y) in pts {
                let (kx, ky) = key(&(label.clone(), *x, *y));
                let group = labels.iter().find(|l| l.0 == kx && l.1 == ky).expect("grouped");
                let text = if group.2.len() == pts.len() && pts.len() > 1 {
                    "all conditions".to_string()
                } else {
                    group.2.join(" = ")
                };
                let bars = [vec![(x.1, y.0), (x.2, y.0)], vec![(x.0, y.1), (x.0, y.2)]];
                for b in bars {
                    chart.draw_series(std::iter::once(PathElement::new(b, c.mix(0.7)))).map_err(|e| e.to_string())?;
                }
                chart
                    .draw_series(std::iter::once(Circle::new((x.0, y.0), 4, c.filled())))
                    .map_err(|e| e.to_string())?;
                if group.2.first() != Some(&label.as_str()) {
                    continue;
                }
                // Right of the point on the left half, left of it on the right half.
                let (dx, h) = if x.0 > 55.0 { (-1.0, HPos::Right) } else { (1.0, HPos::Left) };
                chart
                    .draw_series(std::iter::once(Text::new(
                        text,
                        (x.0 + dx, y.0 + ymax * (0.02 * (1 + k) as f64 + 0.05 * drawn as f64)),
                        ("sans-serif", 11).into_font().color(&c).pos(Pos::new(h, VPos::Bottom)),
                    )))
                    .map_err(|e| e.to_string())?;
                drawn += 1;
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(GREY)
            .label_font(("sans-serif", 12))
            .draw()
            .map_err(|e| e.to_string())?;
        Ok(())
    })
}
