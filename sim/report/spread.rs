//! The spread figure: the communication graph with each agent coloured by when poison first
//! reached its prompt (early dark red, late yellow, never grey), attackers as black squares, and
//! the edges poison crossed in red (thicker for more crossings); one panel per arm, side by side.
//!
//! Positions: the topology's natural layout where it has one (a wheel or star's hub in the
//! centre, a chain on a line, a binary tree by levels), else a circular layout (agents in id
//! order around a circle: deterministic, every edge visible, and no layout crate needed).

use super::plot::{both, canvas};
use crate::error::Result;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

/// How agents are placed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Agent 0 in the centre, the others on a circle (wheel, star).
    Hub,
    /// On a line, in id order (chain).
    Line,
    /// A binary tree by levels (agent i's parent is (i − 1) / 2).
    Tree,
    /// On a circle, in id order.
    Circle,
}

/// One arm's panel.
#[derive(Clone, Debug, PartialEq)]
pub struct SpreadPanel {
    /// The panel's title (the arm and what it shows).
    pub title: String,
    /// Per agent, the first exposure as a share of the run (0 = its first task, 1 = its last),
    /// with its label (`task 3, round 2`); `None`: never exposed.
    pub exposure: Vec<Option<f64>>,
    /// Per agent, whether it is an attacker.
    pub attackers: Vec<bool>,
    /// Edges poison crossed: (sender, receiver, crossings).
    pub poison_edges: Vec<(u32, u32, u64)>,
}

/// Agent positions in the unit square.
pub fn positions(layout: Layout, n: usize) -> Vec<(f64, f64)> {
    let circle = |k: usize, m: usize, r: f64| {
        let a = std::f64::consts::TAU * k as f64 / m.max(1) as f64 - std::f64::consts::FRAC_PI_2;
        (0.5 + r * a.cos(), 0.5 + r * a.sin())
    };
    match layout {
        Layout::Circle => (0..n).map(|k| circle(k, n, 0.42)).collect(),
        Layout::Hub => (0..n).map(|k| if k == 0 { (0.5, 0.5) } else { circle(k - 1, n - 1, 0.42) }).collect(),
        Layout::Line => (0..n).map(|k| (0.06 + 0.88 * k as f64 / (n.max(2) - 1) as f64, 0.5)).collect(),
        Layout::Tree => {
            let depth = |k: usize| usize::BITS as usize - 1 - (k + 1).leading_zeros() as usize;
            let levels = if n == 0 { 1 } else { depth(n - 1) + 1 };
            (0..n)
                .map(|k| {
                    let d = depth(k);
                    let first = (1usize << d) - 1;
                    let width = 1usize << d;
                    let x = (k - first) as f64 + 0.5;
                    (x / width as f64, 0.08 + 0.84 * d as f64 / (levels.max(2) - 1) as f64)
                })
                .collect()
        }
    }
}

/// Early exposure dark red, late yellow.
fn exposure_colour(t: f64) -> RGBColor {
    let t = t.clamp(0.0, 1.0);
    let lerp = |a: u8, b: u8| (f64::from(a) + (f64::from(b) - f64::from(a)) * t).round() as u8;
    RGBColor(lerp(150, 250), lerp(0, 210), lerp(20, 60))
}

const NEVER: RGBColor = RGBColor(205, 205, 205);
const EDGE: RGBColor = RGBColor(185, 185, 185);
const POISON: RGBColor = RGBColor(210, 30, 30);

/// Draws the panels side by side with one legend below; `edges` are the graph's (directed)
/// edges, `first` and `last` the labels of the scale's ends (`task 1`, `task 60`).
pub fn spread(
    path: &Path,
    title: &str,
    layout: Layout,
    edges: &[(u32, u32)],
    panels: &[SpreadPanel],
    (first, last): (&str, &str),
) -> Result<()> {
    let n = panels.first().map_or(0, |p| p.exposure.len());
    let pos = positions(layout, n);
    let k = panels.len().max(1) as u32;
    let (pw, ph) = (420u32, 420u32);
    let labels = n <= 40;
    both!(path, (pw * k, ph + 110), |root| {
        let (top, rest) = root.split_vertically(34);
        top.draw(&Text::new(
            title.to_string(),
            ((pw * k / 2) as i32, 10),
            ("sans-serif", 18)
                .into_font()
                .style(FontStyle::Bold)
                .into_text_style(root)
                .pos(Pos::new(HPos::Center, VPos::Top)),
        ))
        .map_err(|e| e.to_string())?;
        let (body, legend) = rest.split_vertically(ph);
        for (area, p) in body.split_evenly((1, k as usize)).iter().zip(panels) {
            panel(area, p, &pos, edges, labels)?;
        }
        legend_strip(&legend, (first, last))
    })
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    p: &SpreadPanel,
    pos: &[(f64, f64)],
    edges: &[(u32, u32)],
    labels: bool,
) -> std::result::Result<(), String> {
    let (w, h) = area.dim_in_pixel();
    area.draw(&Text::new(
        p.title.clone(),
        (w as i32 / 2, 4),
        ("sans-serif", 14).into_font().into_text_style(area).pos(Pos::new(HPos::Center, VPos::Top)),
    ))
    .map_err(|e| e.to_string())?;
    let px = |(x, y): (f64, f64)| -> (i32, i32) {
        let m = 30.0;
        ((m + x * (f64::from(w) - 2.0 * m)) as i32, (m + 12.0 + y * (f64::from(h) - 2.0 * m - 12.0)) as i32)
    };
    for &(a, b) in edges {
        // Each undirected pair once (both directions share one line).
        if a > b && edges.contains(&(b, a)) {
            continue;
        }
        area.draw(&PathElement::new(vec![px(pos[a as usize]), px(pos[b as usize])], EDGE.stroke_width(1)))
            .map_err(|e| e.to_string())?;
    }
    for &(a, b, count) in &p.poison_edges {
        let width = 1 + (count as f64).log2().clamp(0.0, 4.0) as u32;
        area.draw(&PathElement::new(vec![px(pos[a as usize]), px(pos[b as usize])], POISON.stroke_width(width)))
            .map_err(|e| e.to_string())?;
    }
    let r = if labels { 9 } else { 5 };
    for (i, &xy) in pos.iter().enumerate() {
        let c = px(xy);
        if p.attackers.get(i).copied().unwrap_or(false) {
            area.draw(&Rectangle::new([(c.0 - r, c.1 - r), (c.0 + r, c.1 + r)], BLACK.filled()))
                .map_err(|e| e.to_string())?;
        } else {
            let fill = p.exposure.get(i).copied().flatten().map_or(NEVER, exposure_colour);
            area.draw(&Circle::new(c, r, fill.filled())).map_err(|e| e.to_string())?;
            area.draw(&Circle::new(c, r, BLACK.stroke_width(1))).map_err(|e| e.to_string())?;
        }
        if labels {
            let colour = if p.attackers.get(i).copied().unwrap_or(false) { WHITE } else { BLACK };
            area.draw(&Text::new(
                i.to_string(),
                c,
                ("sans-serif", 10).into_font().color(&colour).pos(Pos::new(HPos::Center, VPos::Center)),
            ))
            .map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

fn legend_strip<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    (first, last): (&str, &str),
) -> std::result::Result<(), String> {
    let font = ("sans-serif", 12).into_font();
    let y = 30;
    let x0 = 20;
    area.draw(&Text::new("first poison in the prompt:", (x0, y - 20), font.clone())).map_err(|e| e.to_string())?;
    for s in 0..100 {
        let c = exposure_colour(f64::from(s) / 99.0);
        area.draw(&Rectangle::new([(x0 + 2 * s, y), (x0 + 2 * s + 2, y + 14)], c.filled()))
            .map_err(|e| e.to_string())?;
    }
    area.draw(&Text::new(first.to_string(), (x0, y + 18), font.clone())).map_err(|e| e.to_string())?;
    area.draw(&Text::new(
        last.to_string(),
        (x0 + 200, y + 18),
        font.clone().into_text_style(area).pos(Pos::new(HPos::Right, VPos::Top)),
    ))
    .map_err(|e| e.to_string())?;
    let x1 = x0 + 240;
    area.draw(&Circle::new((x1, y + 7), 7, NEVER.filled())).map_err(|e| e.to_string())?;
    area.draw(&Circle::new((x1, y + 7), 7, BLACK.stroke_width(1))).map_err(|e| e.to_string())?;
    area.draw(&Text::new("never exposed", (x1 + 12, y), font.clone())).map_err(|e| e.to_string())?;
    let x2 = x1 + 120;
    area.draw(&Rectangle::new([(x2 - 7, y), (x2 + 7, y + 14)], BLACK.filled())).map_err(|e| e.to_string())?;
    area.draw(&Text::new("attacker", (x2 + 12, y), font.clone())).map_err(|e| e.to_string())?;
    let x3 = x2 + 90;
    area.draw(&PathElement::new(vec![(x3 - 10, y + 7), (x3 + 14, y + 7)], POISON.stroke_width(3)))
        .map_err(|e| e.to_string())?;
    area.draw(&Text::new("poison stored over this edge (wider: more often)", (x3 + 20, y), font))
        .map_err(|e| e.to_string())?;
    Ok(())
}
