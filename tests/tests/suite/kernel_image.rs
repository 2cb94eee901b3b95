//! CPU tests: the host picks the machine code or PTX that suits a device and its driver, and
//! refuses code that does not match its manifest or the declarations it was built against.

use streamline::runtime::{embedded_archs, KernelImage, KERNELS, SOURCE_HASH};
use streamline::Kernel;
use streamline_abi::heavy::{HeavyParams, HEAVY_F32};
use streamline_abi::image::{RoiAlignParams, ROI_ALIGN, ROTATE_NEAREST};
use streamline_device::params::ParamFields;

/// The embedded sm_90 PTX, which the tests below edit.
fn image() -> KernelImage {
    KernelImage::embedded_ptx_for(9, 0).expect("the sm_90 PTX is embedded and valid")
}

/// The PTX text of an image that has it.
fn ptx(img: &KernelImage) -> &str {
    img.ptx.as_deref().expect("a PTX image")
}

/// Writes `img`'s PTX and manifest as `k.ptx` and `k.manifest.json` into a new folder named
/// after `what`; returns the folder and the PTX's path.
fn write_files(img: &KernelImage, what: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("streamline-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("k.ptx");
    std::fs::write(&p, ptx(img)).unwrap();
    std::fs::write(
        dir.join("k.manifest.json"),
        serde_json::to_string(&img.manifest).unwrap(),
    )
    .unwrap();
    (dir, p)
}

/// Replaces `from` by `to` in `img`'s PTX.
fn edit(img: &mut KernelImage, from: &str, to: &str) {
    img.ptx = Some(ptx(img).replace(from, to));
}

#[test]
fn embedded_archs_are_sorted_and_selected_by_capability() {
    let archs = embedded_archs();
    assert!(
        archs.contains(&"sm_80") && archs.contains(&"sm_90"),
        "{archs:?}"
    );
    assert!(archs.contains(&"sm_90a"), "{archs:?}");
    // Hopper runs the Hopper-specific build, which has every kernel of the portable one.
    assert_eq!(
        KernelImage::embedded_for(9, 0).unwrap().manifest.arch,
        "sm_90a"
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
fn machine_code_is_picked_where_it_runs_and_the_driver_can_load_it() {
    let cuda13 = Some((13, 0));
    // Hopper and Ampere (any minor version) run their architecture's machine code; nothing
    // else of the image is kept, so nothing else is checked or loaded.
    for (major, minor, arch) in [
        (9, 0, "sm_90a"),
        (8, 0, "sm_80"),
        (8, 6, "sm_80"),
        (8, 9, "sm_80"),
    ] {
        let img = KERNELS.image_for_driver(major, minor, cuda13).unwrap();
        assert_eq!(img.manifest.arch, arch, "{major}.{minor}");
        assert!(img.cubin.is_some() && img.ptx.is_none(), "{}", img.origin);
        assert!(img.origin.contains("cubin"), "{}", img.origin);
    }
    // A newer GPU has the driver compile the highest portable architecture's PTX (sm_90a's
    // runs on Hopper only).
    let img = KERNELS.image_for_driver(10, 0, cuda13).unwrap();
    assert_eq!(img.manifest.arch, "sm_90");
    assert!(img.ptx.is_some() && img.cubin.is_none());
    // A driver older than the ptxas that assembled the machine code: PTX where it suits...
    let old = Some((12, 4));
    let img = KERNELS.image_for_driver(9, 0, old).unwrap();
    assert!(img.ptx.is_some() && img.cubin.is_none());
    assert_eq!(img.manifest.arch, "sm_90");
    // ...and a clear error where none does.
    let e = KERNELS.image_for_driver(8, 0, old).unwrap_err().to_string();
    assert!(
        e.contains("CUDA 12.4") && e.contains("update the driver") && e.contains("all_ptx"),
        "{e}"
    );
}

#[test]
fn a_cubin_replaced_behind_its_manifest_is_refused() {
    let img = KERNELS.image_for_driver(9, 0, None).unwrap();
    img.validate().unwrap();
    let mut bytes = img.cubin.clone().unwrap().into_owned();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 1;
    let bad = KernelImage {
        cubin: Some(bytes.into()),
        ..img
    };
    let e = bad.validate().unwrap_err().to_string();
    assert!(e.contains("cubin is not the one"), "{e}");
}

#[test]
fn a_file_image_keeps_the_code_that_suits_the_device() {
    let cubin = KERNELS.arch_image("sm_90").unwrap();
    assert!(cubin.ptx.is_some() && cubin.cubin.is_some());
    assert!(KERNELS.arch_image("sm_75").is_err());
    let (dir, p) = write_files(&image(), "cubin");
    std::fs::write(dir.join("k.cubin"), cubin.cubin.as_deref().unwrap()).unwrap();
    let file = KernelImage::from_file(&p).unwrap();
    assert!(file.ptx.is_some() && file.cubin.is_some());
    let on_hopper = file.clone().for_device(9, 0, Some((13, 0)));
    assert!(on_hopper.cubin.is_some() && on_hopper.ptx.is_none());
    let old_driver = file.clone().for_device(9, 0, Some((12, 4)));
    assert!(old_driver.ptx.is_some() && old_driver.cubin.is_none());
    let newer_gpu = file.for_device(10, 0, None);
    assert!(newer_gpu.ptx.is_some() && newer_gpu.cubin.is_none());
    std::fs::write(dir.join("k.cubin"), b"not a cubin").unwrap();
    let e = KernelImage::from_file(&p).unwrap_err().to_string();
    assert!(e.contains("cubin is not the one"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
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
    assert!(ptx(&img).contains(&from), "PTX declares {from}");
    edit(
        &mut img,
        &from,
        &format!(".param .align 8 .b8 {name}_param_0[16]"),
    );
    img.manifest.kernels = streamline_builder::manifest::parse_entries(ptx(&img));
    img.manifest.ptx_sha256 = Some(streamline_builder::manifest::ptx_hash(ptx(&img)));
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
        .entry(Kernel::<HeavyParams<f32>>::new("heavy_f32"))
        .unwrap();
}

#[test]
fn every_kernel_records_its_fields_and_a_struct_that_differs_is_refused() {
    let img = image();
    for e in &img.manifest.kernels {
        assert!(e.fields.is_some(), "{} records no fields", e.name);
    }
    let fields = img.entry(HEAVY_F32).unwrap().fields.clone().unwrap();
    let kinds: Vec<_> = fields
        .iter()
        .map(|f| (f.name.as_str(), f.kind.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [("x", "*const f32"), ("y", "*mut f32"), ("n", "u64")]
    );
    // The f16 kernel's struct has the same layout, not the same types: its handle is refused
    // for the f32 entry.
    let f16_fields = <HeavyParams<half::f16> as ParamFields>::FIELDS;
    let swapped = Kernel::<HeavyParams<f32>>::new("heavy_f32").with_fields(f16_fields);
    let e = img.entry(swapped).unwrap_err().to_string();
    assert!(
        e.contains("field 0 is `x: *const f32` at byte 0 in the image but `x: *const f16`"),
        "{e}"
    );
    // So is a struct whose two addresses were swapped.
    let mut reordered = <HeavyParams<f32> as ParamFields>::FIELDS.to_vec();
    let (x, y) = (reordered[0], reordered[1]);
    reordered[0] = streamline_device::params::FieldInfo { offset: 0, ..y };
    reordered[1] = streamline_device::params::FieldInfo { offset: 8, ..x };
    let reordered: &'static [_] = Box::leak(reordered.into_boxed_slice());
    let e = img
        .entry(Kernel::<HeavyParams<f32>>::new("heavy_f32").with_fields(reordered))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("field 0 is `x: *const f32` at byte 0 in the image but `y: *mut f32` at byte 0"),
        "{e}"
    );
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
    edit(&mut img, &format!(".entry {name}("), ".entry renamed(");
    img.manifest.kernels = streamline_builder::manifest::parse_entries(ptx(&img));
    let e = img.entry(ROTATE_NEAREST).unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "kernel `{name}` is declared but the image has no entry `{name}`"
        )),
        "{e}"
    );
}

#[test]
fn ptx_edited_behind_its_manifest_is_refused() {
    let mut img = image();
    edit(&mut img, ".param .align 8 .b8", ".param .align 4 .b8");
    let e = img.validate().unwrap_err().to_string();
    assert!(e.contains("differ from its manifest"), "{e}");
}

#[test]
fn ptx_file_without_manifest_is_an_error() {
    let dir = std::env::temp_dir().join(format!("streamline-ptx-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("k.ptx");
    std::fs::write(&p, ptx(&image())).unwrap();
    let e = KernelImage::from_file(&p).unwrap_err().to_string();
    assert!(e.contains("k.manifest.json"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_line_appended_to_the_ptx_is_refused_and_the_built_one_loads() {
    let img = image();
    assert!(img.manifest.ptx_sha256.is_some());
    img.validate().unwrap();
    let (dir, p) = write_files(&img, "ptx-append");
    KernelImage::from_file(&p).unwrap();
    std::fs::write(&p, format!("{}// appended after the build\n", ptx(&img))).unwrap();
    let e = KernelImage::from_file(&p).unwrap_err().to_string();
    assert!(
        e.contains("not the one its manifest was written for"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
