//! `normalize`.

use super::*;

#[test]
fn normalize_matches_reference() {
    gpu_property(48, (shape(), any::<u64>(), 0usize..3), |(s, seed, off)| {
        let g = gpu().unwrap();
        let x = values(s.len() + off, seed);
        let mean: Vec<f32> = (0..s.c).map(|c| 0.3 * c as f32 - 0.2).collect();
        let std: Vec<f32> = (0..s.c).map(|c| 0.2 + 0.7 * c as f32).collect();
        let stats = ChannelStats::upload(g.stream(), &mean, &std).unwrap();
        let xd = upload(&x);
        let mut y = poisoned(s.len());
        {
            let xv = xd.slice(off..off + s.len());
            let mut yv = y.slice_mut(GUARD..GUARD + s.len());
            normalize(g, g.stream(), s, &xv, &stats, &mut yv).unwrap();
        }
        let got = fetch(&y, s.len())?;
        let xs: Vec<f64> = x[off..].iter().map(|&v| v as f64).collect();
        let want = reference::normalize(&xs, s, &mean, &std);
        // Two roundings (subtract, divide): |error| <= 2u |result| + u |x - m| / |std|,
        // below 4u (|x| + |m|) / min|std| for every element.
        let tol = 4.0 * U * (max_abs(&x) + 0.5) / 0.2;
        close(&got, &want, tol, "normalize")
    });
}
