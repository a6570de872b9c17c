"""Start gpu_features_node as VINS-Fusion's stereo feature tracker: two cameras, the left
tracks found in the right camera (track.stereo), both in one `feature` message (VINS-Fusion's
`camera` channel 0 and 1), as its estimator reads them with `num_of_cam: 2`.

    ros2 launch gpu_features vins_stereo.launch.py \
        image0:=/cam0/image_raw image1:=/cam1/image_raw \
        camera_info0:=/cam0/camera_info camera_info1:=/cam1/camera_info

Or with VINS-Fusion's own config file (its cameras and front-end keys; camera_info is then
not read): vins_config:=/path/to/euroc_stereo_imu_config.yaml.

The node is named feature_tracker (config/vins_frontend_params.yaml, inputs [left, right],
track.stereo true) and publishes /feature_tracker/feature, the restart topic (VINS-Fusion
listens on /vins_restart: pass restart:=/vins_restart), and each camera's tracks.

Arguments: params_file, namespace, node_name, image0, image1, camera_info0, camera_info1,
feature, restart, tracks0, tracks1, vins_config, transport (raw | compressed), diagnostics.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description():
    default_params = os.path.join(
        get_package_share_directory('gpu_features'), 'config', 'vins_frontend_params.yaml')
    # launch argument -> (the node's topic, default)
    topics = {
        'image0': ('left/image', '/cam0/image_raw'),
        'image1': ('right/image', '/cam1/image_raw'),
        'camera_info0': ('left/camera_info', '/cam0/camera_info'),
        'camera_info1': ('right/camera_info', '/cam1/camera_info'),
        'feature': ('left/feature', '/feature_tracker/feature'),
        'restart': ('left/restart', '/feature_tracker/restart'),
        'tracks0': ('left/tracks', '/feature_tracker/tracks0'),
        'tracks1': ('right/tracks', '/feature_tracker/tracks1'),
    }
    args = [
        DeclareLaunchArgument('params_file', default_value=default_params,
                              description='ROS params file (/**: ros__parameters:)'),
        DeclareLaunchArgument('namespace', default_value='',
                              description='namespace of the node'),
        DeclareLaunchArgument('node_name', default_value='feature_tracker',
                              description='node name'),
        DeclareLaunchArgument('vins_config', default_value='',
                              description="VINS-Fusion's config file (empty: camera_info)"),
        DeclareLaunchArgument('transport', default_value='raw',
                              description='raw | compressed (image0/compressed, image1/compressed)'),
        DeclareLaunchArgument('diagnostics', default_value='/diagnostics',
                              description='diagnostics topic'),
    ] + [
        DeclareLaunchArgument(a, default_value=d, description=f'remap the {t} topic')
        for a, (t, d) in topics.items()
    ]
    remaps = [(t, LaunchConfiguration(a)) for a, (t, _) in topics.items()]
    # The compressed subscriptions are the images' names + /compressed.
    remaps += [(f'{t}/compressed', [LaunchConfiguration(a), '/compressed'])
               for a, (t, _) in topics.items() if a.startswith('image')]
    node = Node(
        package='gpu_features',
        executable='gpu_features_node',
        name=LaunchConfiguration('node_name'),
        namespace=LaunchConfiguration('namespace'),
        parameters=[LaunchConfiguration('params_file'),
                    {'inputs': ['left', 'right'], 'track.stereo': True,
                     'feature_format': 'vins_fusion',
                     'vins_config': LaunchConfiguration('vins_config'),
                     'transport': [LaunchConfiguration('transport')]}],
        remappings=remaps + [('/diagnostics', LaunchConfiguration('diagnostics'))],
        output='screen',
        emulate_tty=True,
    )
    return LaunchDescription(args + [node])
