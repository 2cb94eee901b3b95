//! CPU tests: the host refuses PTX that does not match its manifest or the declarations it was
//! built against.

use streamline::runtime::{embedded_archs, KernelImage, SOURCE_HASH};
use streamline::Kernel;
use streamline_abi::heavy::{HeavyParams, HEAVY_F32};
use streamline_abi::image::{RoiAlignParams, ROI_ALIGN, ROTATE_NEAREST};

fn image() -> KernelImage {
    KernelImage::embedded_for(9, 0).expect("the sm_90 image is embedded and valid")
}

#[test]
fn embedded_archs_are_sorted_and_selected_by_capability() {
    let archs = embedded_archs();
    assert!(
        archs.contains(&"sm_80") && archs.contains(&"sm_90"),
        "{archs:?}"
    );
    assert_eq!(
        KernelImage::embedded_for(9, 0).unwrap().manifest.arch,
        "sm_90"
    );
    assert_eq!(
        KernelImage::embedded_for(8, 9).unwrap().manifest.arch,
        "sm_80"
    );
    assert_eq!(
        KernelImage::embedded_for(12, 0).unwrap().manifest.arch,
        "sm_90"
    );
    let e = KernelImage::embedded_for(7, 5).unwrap_err().to_string();
    assert!(e.contains("compute capability 7.5"), "{e}");
}

#[test]
fn every_declared_kernel_is_in_the_embedded_image() {
    let img = image();
    img.check_source(SOURCE_HASH).unwrap();
    img.entry(HEAVY_F32).unwrap();
    let roi = img.entry(ROI_ALIGN).unwrap();
    assert_eq!(roi.bounds.map(|b| b.max_threads), Some(256));
}

#[test]
fn stale_source_hash_is_refused() {
    let mut img = image();
    img.manifest.source_hash = "0".repeat(64);
    let e = img.check_source(SOURCE_HASH).unwrap_err().to_string();
    assert!(e.contains("other kernel sources"), "{e}");
}

#[test]
fn changed_parameter_layout_is_refused() {
    let mut img = image();
    let name = HEAVY_F32.name();
    let from = format!(
        ".param .align 8 .b8 {name}_param_0[{}]",
        HEAVY_F32.param_size()
    );
    assert!(img.ptx.contains(&from), "PTX declares {from}");
    img.ptx = img
        .ptx
        .replace(&from, &format!(".param .align 8 .b8 {name}_param_0[16]"));
    img.manifest.kernels = streamline_builder::manifest::parse_entries(&img.ptx);
    img.manifest.ptx_sha256 = Some(streamline_builder::manifest::ptx_hash(&img.ptx));
    img.validate().unwrap();
    let e = img.entry(HEAVY_F32).unwrap_err().to_string();
    assert!(e.contains(name) && e.contains("size: 16"), "{e}");
}

#[test]
fn a_handle_of_another_parameter_type_is_refused() {
    let other = Kernel::<[u64; 2]>::new(HEAVY_F32.name());
    let e = image().entry(other).unwrap_err().to_string();
    assert!(e.contains("heavy_f32") && e.contains("size: 16"), "{e}");
    // The same layout under its own declaration passes.
    image()
        .entry(Kernel::<HeavyParams>::new("heavy_f32"))
        .unwrap();
}

#[test]
fn changed_launch_bounds_are_refused() {
    let undeclared = Kernel::<RoiAlignParams>::new(ROI_ALIGN.name());
    let e = image().entry(undeclared).unwrap_err().to_string();
    assert!(e.contains("launch bounds"), "{e}");
}

#[test]
fn missing_kernel_is_refused() {
    let mut img = image();
    let name = ROTATE_NEAREST.name();
    img.ptx = img
        .ptx
        .replace(&format!(".entry {name}("), ".entry renamed(");
    img.manifest.kernels = streamline_builder::manifest::parse_entries(&img.ptx);
    let e = img.entry(ROTATE_NEAREST).unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "kernel `{name}` is declared but the PTX has no entry `{name}`"
        )),
        "{e}"
    );
}

#[test]
fn ptx_edited_behind_its_manifest_is_refused() {
    let mut img = image();
    img.ptx = img
        .ptx
        .replace(".param .align 8 .b8", ".param .align 4 .b8");
    let e = img.validate().unwrap_err().to_string();
    assert!(e.contains("differ from its manifest"), "{e}");
}

#[test]
fn ptx_file_without_manifest_is_an_error() {
    let dir = std::env::temp_dir().join(format!("streamline-ptx-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("k.ptx");
    std::fs::write(&p, image().ptx).unwrap();
    let e = KernelImage::from_file(&p).unwrap_err().to_string();
    assert!(e.contains("k.manifest.json"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_line_appended_to_the_ptx_is_refused_and_the_built_one_loads() {
    let img = image();
    assert!(img.manifest.ptx_sha256.is_some());
    img.validate().unwrap();
    let dir = std::env::temp_dir().join(format!("streamline-ptx-append-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("k.ptx");
    std::fs::write(&p, &img.ptx).unwrap();
    std::fs::write(
        dir.join("k.manifest.json"),
        serde_json::to_string(&img.manifest).unwrap(),
    )
    .unwrap();
    KernelImage::from_file(&p).unwrap();
    std::fs::write(&p, format!("{}// appended after the build\n", img.ptx)).unwrap();
    let e = KernelImage::from_file(&p).unwrap_err().to_string();
    assert!(
        e.contains("not the one its manifest was written for"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
