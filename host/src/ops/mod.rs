//! Safe launchers, one module per kernel family (the same names as in `gpu-kernels/src`).
//! Each checks lengths and shapes, computes the launch configuration with checked
//! conversions, takes outputs as `&mut` so cudarc's stream tracking orders the launch after
//! earlier work on them, and holds the only `unsafe` launch of its kernel: most through
//! [`Module::prepare`](crate::Module::prepare), the path a user's kernel takes.

pub mod heavy;
pub mod image;
pub mod matmul;
pub mod spin;
pub mod train;

/// The one-dimensional configuration over `items` of `block`-thread blocks taking `per_block`
/// items each: `ceil(items / per_block)` blocks, at least one and at most `max_blocks` (the
/// kernel strides over what the grid leaves), as
/// [`Gpu::launch_strided`](crate::Gpu::launch_strided) sizes it.
pub(crate) fn strided(
    items: u64,
    (block, per_block): (u32, u64),
    max_blocks: u32,
) -> crate::LaunchConfig {
    let blocks = items
        .div_ceil(per_block.max(1))
        .clamp(1, max_blocks.max(1) as u64) as u32;
    crate::LaunchConfig::new((blocks, 1, 1), (block, 1, 1))
}

/// The error of an elementwise launcher (ours or a user's) whose output `y` (of `y_len`
/// elements) does not match its input `x` (of `x_len`).
pub fn check_same_len(x_len: usize, y_len: usize) -> crate::Result<()> {
    if x_len != y_len {
        return Err(crate::Error::arg(
            "y",
            format!("length {y_len} differs from the length of x, {x_len}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::strided;

    #[test]
    fn strided_grids_cover_the_items_within_their_cap() {
        let blocks = |items, per_block, max| strided(items, (128, per_block), max).grid;
        assert_eq!(blocks(0, 128, 10), (1, 1, 1));
        assert_eq!(blocks(128, 128, 10), (1, 1, 1));
        assert_eq!(blocks(129, 128, 10), (2, 1, 1));
        assert_eq!(blocks(1 << 40, 128, 10), (10, 1, 1));
        assert_eq!(blocks(5, 0, 0), (1, 1, 1));
        assert_eq!(strided(1000, (256, 4096), 8).block, (256, 1, 1));
    }
}
