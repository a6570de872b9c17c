//! CUDA backend (cudarc, NVRTC at start-up). Each stage mirrors `src/cpu/<stage>.rs`.

use crate::config::Config;
use crate::error::{Error, Result};
use crate::image::ImageView;
use crate::pipeline::Features;

pub struct CudaPipeline {}

impl CudaPipeline {
    pub fn new() -> Result<Self> {
        Err(Error::Cuda("the CUDA backend is not built yet".into()))
    }

    pub fn process(&mut self, _cfg: &Config, _frame: &ImageView) -> Result<Features> {
        Err(Error::Cuda("the CUDA backend is not built yet".into()))
    }
}
