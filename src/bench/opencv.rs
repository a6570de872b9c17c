//! OpenCV's timings: scripts/bench_opencv.py run as a subprocess.

#[allow(unused_imports)]
use super::*;

/// Writes the frames as PNG and runs the OpenCV script on them: its JSON, or why not.
pub(super) fn run_opencv(
    python: &str,
    dir: &Path,
    size: Size,
    frames: &[GrayImage],
    runs: usize,
) -> std::result::Result<Value, String> {
    run_frames_script(
        python,
        dir,
        ("bench_opencv.py", OPENCV_SCRIPT),
        size,
        frames,
        runs,
    )
}

/// Writes `script` (name, text) into `dir` (once) and the frames as PNG, and runs it on
/// them with `--runs runs --warmup 3`: its JSON, or why not.
pub(super) fn run_frames_script(
    python: &str,
    dir: &Path,
    (name, text): (&str, &str),
    size: Size,
    frames: &[GrayImage],
    runs: usize,
) -> std::result::Result<Value, String> {
    let script = dir.join(name);
    if !script.exists() {
        std::fs::write(&script, text).map_err(|e| format!("{}: {e}", script.display()))?;
    }
    let files = frame_files(dir, size, frames)?;
    let mut cmd = Command::new(python);
    cmd.arg(&script)
        .args(["--runs", &runs.to_string(), "--warmup", "3"])
        .args(&files);
    script_json(python, cmd)
}

/// The frames of one size as PNG files in `dir` (written once; the OpenCV and the peers
/// scripts read the same files).
pub(super) fn frame_files(
    dir: &Path,
    size: Size,
    frames: &[GrayImage],
) -> std::result::Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        let path = dir.join(format!("{size}_{i}.png"));
        if !path.exists() {
            save_gray_png(f, &path).map_err(|e| e.to_string())?;
        }
        files.push(path);
    }
    Ok(files)
}

/// Runs the OpenCV script (`cmd`, prepared by the caller) and parses the JSON it prints; the
/// last stderr line when it fails.
pub(super) fn script_json(python: &str, mut cmd: Command) -> std::result::Result<Value, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {python}: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().last().unwrap_or("").trim().to_string();
        return Err(format!("{python} failed: {last}"));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("bad JSON from the script: {e}"))
}
