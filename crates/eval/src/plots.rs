//! The HTML report's plots, drawn with `plotters`' SVG backend into strings and inlined.
//! The `xmlns` attribute plotters writes is dropped: inline `<svg>` in HTML needs none, and
//! the report then contains no URL at all.

use crate::error::EvalError;
use crate::metrics::RocPoint;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

const FONT: &str = "sans-serif";

fn perr<E: std::fmt::Display>(e: E) -> EvalError {
    EvalError::Plot(e.to_string())
}

fn finish(svg: String) -> String {
    svg.replacen(" xmlns=\"http://www.w3.org/2000/svg\"", "", 1)
}

/// Top of a y axis of shares: the largest share (at least 5 %) plus a tenth.
fn share_axis_max(series: &[(String, Vec<f64>)]) -> f64 {
    series
        .iter()
        .flat_map(|(_, h)| h.iter().copied())
        .fold(0.0f64, f64::max)
        .max(0.05)
        * 1.1
}

fn color(i: usize) -> RGBColor {
    // Colour-blind-friendly (Okabe-Ito) first, then plotters' palette.
    const OKABE_ITO: [(u8, u8, u8); 7] = [
        (0, 114, 178),
        (213, 94, 0),
        (0, 158, 115),
        (204, 121, 167),
        (230, 159, 0),
        (86, 180, 233),
        (120, 120, 120),
    ];
    match OKABE_ITO.get(i) {
        Some(&(r, g, b)) => RGBColor(r, g, b),
        None => {
            let c = Palette99::pick(i).to_rgba();
            RGBColor(c.0, c.1, c.2)
        }
    }
}

/// ROC curves, one per named series, with the chance diagonal.
pub fn roc(title: &str, curves: &[(String, Vec<RocPoint>)]) -> Result<String, EvalError> {
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (520, 440)).into_drawing_area();
        root.fill(&WHITE).map_err(perr)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 18))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(52)
            .build_cartesian_2d(0f64..1f64, 0f64..1f64)
            .map_err(perr)?;
        chart
            .configure_mesh()
            .light_line_style(RGBColor(242, 242, 242))
            .x_desc("false positive rate")
            .y_desc("true positive rate")
            .x_label_formatter(&|x| format!("{:.0}%", x * 100.0))
            .y_label_formatter(&|y| format!("{:.0}%", y * 100.0))
            .draw()
            .map_err(perr)?;
        chart
            .draw_series(LineSeries::new(
                [(0.0, 0.0), (1.0, 1.0)],
                ShapeStyle::from(RGBColor(180, 180, 180)).stroke_width(1),
            ))
            .map_err(perr)?;
        for (i, (name, pts)) in curves.iter().enumerate() {
            let c = color(i);
            chart
                .draw_series(LineSeries::new(
                    pts.iter().map(|p| (p.fpr, p.tpr)),
                    c.stroke_width(2),
                ))
                .map_err(perr)?
                .label(name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(perr)?;
        root.present().map_err(perr)?;
    }
    Ok(finish(buf))
}

/// Score histograms (20 bins over 0..1), one translucent series per label, as the fraction
/// of that label's prompts in each bin.
pub fn score_histograms(title: &str, series: &[(String, Vec<f64>)]) -> Result<String, EvalError> {
    const BINS: usize = 20;
    let hists: Vec<(String, Vec<f64>)> = series
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(name, v)| {
            let mut h = vec![0f64; BINS];
            for &s in v {
                let b = ((s.clamp(0.0, 1.0) * BINS as f64) as usize).min(BINS - 1);
                h[b] += 1.0;
            }
            let n = v.len() as f64;
            (
                format!("{name} (n={})", v.len()),
                h.into_iter().map(|x| x / n).collect(),
            )
        })
        .collect();
    let ymax = share_axis_max(&hists);
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (560, 380)).into_drawing_area();
        root.fill(&WHITE).map_err(perr)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 18))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(52)
            .build_cartesian_2d(0f64..1f64, 0f64..ymax)
            .map_err(perr)?;
        chart
            .configure_mesh()
            .light_line_style(RGBColor(242, 242, 242))
            .x_desc("score")
            .y_desc("share of the label's prompts")
            .y_label_formatter(&|y| format!("{:.0}%", y * 100.0))
            .draw()
            .map_err(perr)?;
        let w = 1.0 / BINS as f64;
        for (i, (name, h)) in hists.iter().enumerate() {
            let c = color(i);
            chart
                .draw_series(
                    h.iter()
                        .enumerate()
                        .filter(|(_, f)| **f > 0.0)
                        .map(|(b, f)| {
                            let x0 = b as f64 * w;
                            Rectangle::new([(x0, 0.0), (x0 + w, *f)], c.mix(0.35).filled())
                        }),
                )
                .map_err(perr)?
                .label(name.as_str())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.mix(0.6).filled())
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperMiddle)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(perr)?;
        root.present().map_err(perr)?;
    }
    Ok(finish(buf))
}

/// A heatmap: rows × columns of rates in 0..1 (`None` cells are drawn grey, "n/a"). Each row
/// label carries its denominator.
pub fn heatmap(
    title: &str,
    rows: &[String],
    cols: &[String],
    cells: &[Vec<Option<f64>>],
) -> Result<String, EvalError> {
    let label_w: i32 = rows
        .iter()
        .map(|r| r.chars().count() as i32 * 7 + 16)
        .max()
        .unwrap_or(80)
        .clamp(80, 320);
    let cell_w: i32 = cols
        .iter()
        .map(|c| c.chars().count() as i32 * 7 + 16)
        .max()
        .unwrap_or(70)
        .max(70);
    let cell_h: i32 = 24;
    let top: i32 = 64;
    let width = label_w + cell_w * cols.len().max(1) as i32 + 20;
    let height = top + cell_h * rows.len().max(1) as i32 + 16;
    let mut buf = String::new();
    {
        let root =
            SVGBackend::with_string(&mut buf, (width as u32, height as u32)).into_drawing_area();
        root.fill(&WHITE).map_err(perr)?;
        let center = |size: i32| {
            TextStyle::from((FONT, size).into_font()).pos(Pos::new(HPos::Center, VPos::Center))
        };
        let left = |size: i32| {
            TextStyle::from((FONT, size).into_font()).pos(Pos::new(HPos::Right, VPos::Center))
        };
        root.draw(&Text::new(title, (width / 2, 16), center(16)))
            .map_err(perr)?;
        for (j, c) in cols.iter().enumerate() {
            let x = label_w + cell_w * j as i32 + cell_w / 2;
            root.draw(&Text::new(c.as_str(), (x, top - 14), center(12)))
                .map_err(perr)?;
        }
        for (i, r) in rows.iter().enumerate() {
            let y0 = top + cell_h * i as i32;
            root.draw(&Text::new(
                r.as_str(),
                (label_w - 8, y0 + cell_h / 2),
                left(12),
            ))
            .map_err(perr)?;
            for j in 0..cols.len() {
                let x0 = label_w + cell_w * j as i32;
                let v = cells.get(i).and_then(|row| row.get(j)).copied().flatten();
                let (fill, text, ink) = match v {
                    Some(rate) => {
                        let t = rate.clamp(0.0, 1.0);
                        // White → deep blue.
                        let shade = |lo: f64, hi: f64| (lo + (hi - lo) * t).round() as u8;
                        (
                            RGBColor(shade(247.0, 8.0), shade(251.0, 69.0), shade(255.0, 148.0)),
                            format!("{:.0}%", rate * 100.0),
                            if t > 0.55 { WHITE } else { BLACK },
                        )
                    }
                    None => (RGBColor(225, 225, 225), "n/a".to_string(), BLACK),
                };
                root.draw(&Rectangle::new(
                    [(x0, y0), (x0 + cell_w - 2, y0 + cell_h - 2)],
                    fill.filled(),
                ))
                .map_err(perr)?;
                root.draw(&Text::new(
                    text,
                    (x0 + cell_w / 2, y0 + cell_h / 2),
                    center(12).color(&ink),
                ))
                .map_err(perr)?;
            }
        }
        root.present().map_err(perr)?;
    }
    Ok(finish(buf))
}

fn fmt_us(us: u64) -> String {
    if us >= 1_000_000 {
        format!("{}s", us / 1_000_000)
    } else if us >= 1000 {
        format!("{}ms", us / 1000)
    } else {
        format!("{us}µs")
    }
}

/// Latency distribution: the share of prompts per power-of-two bucket of microseconds, one
/// bar per series in each bucket.
pub fn latency(title: &str, series: &[(String, Vec<u64>)]) -> Result<String, EvalError> {
    // Bucket k holds [2^(k-1), 2^k) µs; bucket 0 holds 0.
    let bucket = |us: u64| (64 - us.leading_zeros()) as usize;
    let all: Vec<usize> = series
        .iter()
        .flat_map(|(_, v)| v.iter().map(|&u| bucket(u)))
        .collect();
    let lo = all.iter().copied().min().unwrap_or(0);
    let hi = all.iter().copied().max().unwrap_or(1).max(lo + 1);
    let shares: Vec<(String, Vec<f64>)> = series
        .iter()
        .map(|(name, v)| {
            let mut h = vec![0f64; hi - lo + 1];
            for &u in v {
                h[bucket(u) - lo] += 1.0;
            }
            let n = (v.len() as f64).max(1.0);
            (name.clone(), h.into_iter().map(|x| x / n).collect())
        })
        .collect();
    let ymax = share_axis_max(&shares);
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (620, 380)).into_drawing_area();
        root.fill(&WHITE).map_err(perr)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 18))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(52)
            .build_cartesian_2d((lo as f64 - 0.5)..(hi as f64 + 0.5), 0f64..ymax)
            .map_err(perr)?;
        chart
            .configure_mesh()
            .light_line_style(RGBColor(242, 242, 242))
            .x_labels(hi - lo + 2)
            .x_label_formatter(&|x| {
                let k = x.round();
                if (x - k).abs() > 1e-6 || k < 0.0 {
                    String::new()
                } else {
                    format!("<{}", fmt_us(1u64 << (k as u32).min(63)))
                }
            })
            .x_desc("whole-scan latency (power-of-two buckets)")
            .y_desc("share of prompts")
            .y_label_formatter(&|y| format!("{:.0}%", y * 100.0))
            .draw()
            .map_err(perr)?;
        let n = shares.len().max(1) as f64;
        let w = 0.8 / n;
        for (i, (name, h)) in shares.iter().enumerate() {
            let c = color(i);
            chart
                .draw_series(
                    h.iter()
                        .enumerate()
                        .filter(|(_, f)| **f > 0.0)
                        .map(|(b, f)| {
                            let x0 = (b + lo) as f64 - 0.4 + w * i as f64;
                            Rectangle::new([(x0, 0.0), (x0 + w, *f)], c.mix(0.8).filled())
                        }),
                )
                .map_err(perr)?
                .label(name.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.filled()));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(perr)?;
        root.present().map_err(perr)?;
    }
    Ok(finish(buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plots_are_inline_svg_without_urls() {
        let pts = crate::metrics::roc_curve(&[(0.9, true), (0.2, false), (0.5, true)]);
        let plots = [
            roc("ROC", &[("a<b>".to_string(), pts)]).unwrap(),
            score_histograms("h", &[("attack".into(), vec![0.1, 0.9, 1.0])]).unwrap(),
            heatmap(
                "m",
                &["cat (n=2)".into()],
                &["rules".into(), "(final)".into()],
                &[vec![Some(0.5), None]],
            )
            .unwrap(),
            latency("l", &[("default".into(), vec![0, 3, 900, 70_000])]).unwrap(),
        ];
        for p in &plots {
            assert!(p.starts_with("<svg"), "{p}");
            assert!(p.trim_end().ends_with("</svg>"));
            assert!(!p.contains("http"), "{p}");
        }
        // Text is escaped by the backend.
        assert!(plots[0].contains("a&lt;b&gt;"));
        assert!(plots[2].contains("50%") && plots[2].contains("n/a"));
    }
}
