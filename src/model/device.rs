//! [`DeviceSpec`]: where the model runs (`--device cpu|cuda[:N]|metal[:N]`, `CAIRN_DEVICE`),
//! parsed from the user's words and opened into a candle [`Device`] when the model loads.
//!
//! The CPU runs cairn's own engine (or `--engine candle`); any other device runs the candle
//! engine, whose backend for it is compiled in only by the matching cargo feature (`cuda`,
//! `metal`). A build without it, asked for that device, says which feature to build with
//! before anything is fetched or loaded.

use std::fmt;

use candle_core::Device;

use super::error::{ModelError, Result};

/// A device as the user named it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceSpec {
    /// The CPU (the default).
    #[default]
    Cpu,
    /// NVIDIA GPU number N (CUDA's ordinal; `cuda` is `cuda:0`).
    Cuda(usize),
    /// Apple GPU number N (`metal` is `metal:0`).
    Metal(usize),
}

impl DeviceSpec {
    /// Whether this is the CPU.
    pub fn is_cpu(self) -> bool {
        self == DeviceSpec::Cpu
    }

    /// The cargo feature that compiles this device's backend in (`None` for the CPU).
    pub fn feature(self) -> Option<&'static str> {
        match self {
            DeviceSpec::Cpu => None,
            DeviceSpec::Cuda(_) => Some("cuda"),
            DeviceSpec::Metal(_) => Some("metal"),
        }
    }

    /// Whether this build has the backend for this device.
    pub fn compiled(self) -> bool {
        match self {
            DeviceSpec::Cpu => true,
            DeviceSpec::Cuda(_) => cfg!(feature = "cuda"),
            DeviceSpec::Metal(_) => cfg!(feature = "metal"),
        }
    }

    /// Checks that this build can run on the device; the error says which feature to build
    /// with and what it needs.
    pub fn check_compiled(self) -> std::result::Result<(), String> {
        if self.compiled() {
            return Ok(());
        }
        let (feature, needs) = match self {
            DeviceSpec::Cuda(_) => (
                "cuda",
                "the CUDA toolkit (nvcc) to build and an NVIDIA driver to run",
            ),
            _ => ("metal", "macOS with Metal"),
        };
        Err(format!(
            "`{self}` needs a cairn built with the `{feature}` feature, and this one was built without it: \
             build with `cargo build --release --features {feature}` (needs {needs}), or use --device cpu"
        ))
    }

    /// Opens the device: the CPU at once, a GPU through candle's backend (which checks that
    /// the GPU exists and its driver answers).
    pub fn open(self) -> Result<Device> {
        self.check_compiled().map_err(|reason| ModelError::Device {
            device: self.to_string(),
            reason,
        })?;
        let opened = match self {
            DeviceSpec::Cpu => return Ok(Device::Cpu),
            DeviceSpec::Cuda(n) => Device::new_cuda(n),
            DeviceSpec::Metal(n) => Device::new_metal(n),
        };
        opened.map_err(|e| ModelError::Device {
            device: self.to_string(),
            reason: format!("{e}; check that the GPU is there (`nvidia-smi` for CUDA) and that its number is right"),
        })
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSpec::Cpu => write!(f, "cpu"),
            DeviceSpec::Cuda(n) => write!(f, "cuda:{n}"),
            DeviceSpec::Metal(n) => write!(f, "metal:{n}"),
        }
    }
}

/// Bytes of the GPU's memory in use (by every process on it), where the backend can say:
/// CUDA devices; `None` on the CPU and on Metal.
pub fn gpu_memory_used(device: &Device) -> Option<u64> {
    #[cfg(feature = "cuda")]
    if let Ok(cuda) = device.as_cuda_device() {
        let (free, total) = cuda.cuda_stream().context().mem_get_info().ok()?;
        return Some(total.saturating_sub(free) as u64);
    }
    let _ = device;
    None
}

/// The highest device number accepted; more GPUs than this in one machine is a typo.
const MAX_ORDINAL: usize = 255;

impl std::str::FromStr for DeviceSpec {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let s = s.trim();
        let (kind, ordinal) = match s.split_once(':') {
            Some((kind, n)) => (kind, Some(n)),
            None => (s, None),
        };
        let ordinal = match ordinal {
            None => 0,
            Some(n) => match n.parse::<usize>() {
                Ok(n) if n <= MAX_ORDINAL => n,
                _ => {
                    return Err(format!(
                        "device `{s}`: the number after `:` must be a GPU number from 0 to {MAX_ORDINAL}, like cuda:0"
                    ))
                }
            },
        };
        match kind.to_ascii_lowercase().as_str() {
            "cpu" if ordinal == 0 => Ok(DeviceSpec::Cpu),
            "cuda" => Ok(DeviceSpec::Cuda(ordinal)),
            "metal" => Ok(DeviceSpec::Metal(ordinal)),
            _ => Err(format!(
                "unknown device `{s}`: expected cpu, cuda, cuda:N or metal"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_forms() {
        assert_eq!("cpu".parse(), Ok(DeviceSpec::Cpu));
        assert_eq!("CUDA".parse(), Ok(DeviceSpec::Cuda(0)));
        assert_eq!("cuda:1".parse(), Ok(DeviceSpec::Cuda(1)));
        assert_eq!(" metal ".parse(), Ok(DeviceSpec::Metal(0)));
        assert_eq!(DeviceSpec::Cuda(2).to_string(), "cuda:2");
    }

    #[test]
    fn refuses_what_it_cannot_mean() {
        for bad in [
            "tpu",
            "cuda:x",
            "cuda:-1",
            "cuda:99999999999999999999",
            "cpu:1",
            "",
        ] {
            let err = bad.parse::<DeviceSpec>().unwrap_err();
            assert!(err.contains("device"), "{bad}: {err}");
        }
    }

    #[test]
    fn cpu_opens_everywhere() {
        assert!(DeviceSpec::Cpu.open().unwrap().is_cpu());
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn cuda_without_the_feature_names_it() {
        let err = DeviceSpec::Cuda(0).open().unwrap_err().to_string();
        assert!(err.contains("--features cuda"), "{err}");
        assert!(err.contains("cuda:0"), "{err}");
    }
}
