//! CPU tests: the host refuses PTX that does not match what it was built against.

use streamline::runtime::{embedded_archs, KernelImage};
use streamline_abi::KERNELS;

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
fn stale_source_hash_is_refused() {
    let mut img = image();
    img.manifest.source_hash = "0".repeat(64);
    let e = img.validate().unwrap_err().to_string();
    assert!(e.contains("other kernel sources"), "{e}");
}

#[test]
fn changed_parameter_layout_is_refused() {
    let mut img = image();
    let name = KERNELS[0].name;
    let from = format!(
        ".param .align 8 .b8 {name}_param_0[{}]",
        KERNELS[0].param_size
    );
    assert!(img.ptx.contains(&from), "PTX declares {from}");
    img.ptx = img
        .ptx
        .replace(&from, &format!(".param .align 8 .b8 {name}_param_0[16]"));
    img.manifest.kernels = streamline_builder::manifest::parse_entries(&img.ptx);
    let e = img.validate().unwrap_err().to_string();
    assert!(e.contains(name) && e.contains("size: 16"), "{e}");
}

#[test]
fn missing_kernel_is_refused() {
    let mut img = image();
    let name = KERNELS[1].name;
    img.ptx = img
        .ptx
        .replace(&format!(".entry {name}("), ".entry renamed(");
    img.manifest.kernels = streamline_builder::manifest::parse_entries(&img.ptx);
    let e = img.validate().unwrap_err().to_string();
    assert!(e.contains(&format!("`{name}` is missing")), "{e}");
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
    assert!(e.contains("streamline.manifest.json"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
