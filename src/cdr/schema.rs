//! Message type names and their schemas: `ros2msg` text, as rosbag2 stores it (the message,
//! then each dependency after a line of 80 `=` and `MSG: pkg/Name`).

pub const IMAGE: &str = "sensor_msgs/msg/Image";
pub const COMPRESSED_IMAGE: &str = "sensor_msgs/msg/CompressedImage";
pub const POINT_CLOUD2: &str = "sensor_msgs/msg/PointCloud2";
pub const IMAGE_ANNOTATIONS: &str = "foxglove_msgs/msg/ImageAnnotations";
pub const POINT_CLOUD: &str = "sensor_msgs/msg/PointCloud";
pub const CAMERA_INFO: &str = "sensor_msgs/msg/CameraInfo";
pub const BOOL: &str = "std_msgs/msg/Bool";

const SEP: &str =
    "================================================================================\n";

const TIME_DEF: &str = "int32 sec\nuint32 nanosec\n";
const HEADER_DEF: &str = "builtin_interfaces/Time stamp\nstring frame_id\n";

fn with_deps(main: &str, deps: &[(&str, &str)]) -> String {
    let mut s = main.to_string();
    for (name, def) in deps {
        s.push_str(SEP);
        s.push_str("MSG: ");
        s.push_str(name);
        s.push('\n');
        s.push_str(def);
    }
    s
}

/// The `ros2msg` schema text of a message type this module knows, else `None`.
pub fn schema_text(msgtype: &str) -> Option<String> {
    let header_deps = [
        ("std_msgs/Header", HEADER_DEF),
        ("builtin_interfaces/Time", TIME_DEF),
    ];
    Some(match msgtype {
        IMAGE => with_deps(
            "std_msgs/Header header\nuint32 height\nuint32 width\nstring encoding\n\
             uint8 is_bigendian\nuint32 step\nuint8[] data\n",
            &header_deps,
        ),
        COMPRESSED_IMAGE => with_deps(
            "std_msgs/Header header\nstring format\nuint8[] data\n",
            &header_deps,
        ),
        POINT_CLOUD2 => with_deps(
            "std_msgs/Header header\nuint32 height\nuint32 width\nsensor_msgs/PointField[] fields\n\
             bool is_bigendian\nuint32 point_step\nuint32 row_step\nuint8[] data\nbool is_dense\n",
            &[
                ("std_msgs/Header", HEADER_DEF),
                ("builtin_interfaces/Time", TIME_DEF),
                (
                    "sensor_msgs/PointField",
                    "uint8 INT8=1\nuint8 UINT8=2\nuint8 INT16=3\nuint8 UINT16=4\nuint8 INT32=5\n\
                     uint8 UINT32=6\nuint8 FLOAT32=7\nuint8 FLOAT64=8\n\
                     string name\nuint32 offset\nuint8 datatype\nuint32 count\n",
                ),
            ],
        ),
        POINT_CLOUD => with_deps(
            "std_msgs/Header header\ngeometry_msgs/Point32[] points\nsensor_msgs/ChannelFloat32[] channels\n",
            &[
                ("std_msgs/Header", HEADER_DEF),
                ("builtin_interfaces/Time", TIME_DEF),
                ("geometry_msgs/Point32", "float32 x\nfloat32 y\nfloat32 z\n"),
                ("sensor_msgs/ChannelFloat32", "string name\nfloat32[] values\n"),
            ],
        ),
        BOOL => "bool data\n".to_string(),
        CAMERA_INFO => with_deps(
            "std_msgs/Header header\nuint32 height\nuint32 width\nstring distortion_model\n\
             float64[] d\nfloat64[9] k\nfloat64[9] r\nfloat64[12] p\nuint32 binning_x\n\
             uint32 binning_y\nsensor_msgs/RegionOfInterest roi\n",
            &[
                ("std_msgs/Header", HEADER_DEF),
                ("builtin_interfaces/Time", TIME_DEF),
                (
                    "sensor_msgs/RegionOfInterest",
                    "uint32 x_offset\nuint32 y_offset\nuint32 height\nuint32 width\nbool do_rectify\n",
                ),
            ],
        ),
        IMAGE_ANNOTATIONS => with_deps(
            "foxglove_msgs/CircleAnnotation[] circles\nfoxglove_msgs/PointsAnnotation[] points\n\
             foxglove_msgs/TextAnnotation[] texts\n",
            &[
                (
                    "foxglove_msgs/CircleAnnotation",
                    "builtin_interfaces/Time timestamp\nfoxglove_msgs/Point2 position\n\
                     float64 diameter\nfloat64 thickness\nfoxglove_msgs/Color fill_color\n\
                     foxglove_msgs/Color outline_color\n",
                ),
                ("builtin_interfaces/Time", TIME_DEF),
                ("foxglove_msgs/Point2", "float64 x\nfloat64 y\n"),
                (
                    "foxglove_msgs/Color",
                    "float64 r\nfloat64 g\nfloat64 b\nfloat64 a\n",
                ),
                (
                    "foxglove_msgs/PointsAnnotation",
                    "builtin_interfaces/Time timestamp\nuint8 UNKNOWN=0\nuint8 POINTS=1\n\
                     uint8 LINE_LOOP=2\nuint8 LINE_STRIP=3\nuint8 LINE_LIST=4\nuint8 type\n\
                     foxglove_msgs/Point2[] points\nfoxglove_msgs/Color outline_color\n\
                     foxglove_msgs/Color[] outline_colors\nfoxglove_msgs/Color fill_color\n\
                     float64 thickness\n",
                ),
                (
                    "foxglove_msgs/TextAnnotation",
                    "builtin_interfaces/Time timestamp\nfoxglove_msgs/Point2 position\n\
                     string text\nfloat64 font_size\nfoxglove_msgs/Color text_color\n\
                     foxglove_msgs/Color background_color\n",
                ),
            ],
        ),
        _ => return None,
    })
}
