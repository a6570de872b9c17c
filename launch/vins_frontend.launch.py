"""Start gpu_features_node as VINS's feature tracker (config/vins_frontend_params.yaml).

    ros2 launch gpu_features vins_frontend.launch.py \
        image:=/cam0/image_raw camera_info:=/cam0/camera_info

The node is named feature_tracker and publishes where VINS-Mono's and VINS-Fusion's
estimators subscribe: /feature_tracker/feature (sensor_msgs/PointCloud) and, when the
tracker starts over, the restart topic (std_msgs/Bool; VINS-Mono listens on
/feature_tracker/restart, VINS-Fusion on /vins_restart: pass restart:=/vins_restart).

Arguments: params_file, namespace, node_name, image, camera_info, feature, restart, tracks,
feature_format (vins_fusion | vins_mono), diagnostics.
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
    topics = {
        'image': '/cam0/image_raw',
        'camera_info': '/cam0/camera_info',
        'feature': '/feature_tracker/feature',
        'restart': '/feature_tracker/restart',
        'tracks': '/feature_tracker/tracks',
    }
    args = [
        DeclareLaunchArgument('params_file', default_value=default_params,
                              description='ROS params file (/**: ros__parameters:)'),
        DeclareLaunchArgument('namespace', default_value='',
                              description='namespace of the node'),
        DeclareLaunchArgument('node_name', default_value='feature_tracker',
                              description='node name'),
        DeclareLaunchArgument('feature_format', default_value='vins_fusion',
                              description='vins_fusion | vins_mono'),
        DeclareLaunchArgument('diagnostics', default_value='/diagnostics',
                              description='diagnostics topic'),
    ] + [
        DeclareLaunchArgument(t, default_value=d, description=f'remap the {t} topic')
        for t, d in topics.items()
    ]
    node = Node(
        package='gpu_features',
        executable='gpu_features_node',
        name=LaunchConfiguration('node_name'),
        namespace=LaunchConfiguration('namespace'),
        parameters=[LaunchConfiguration('params_file'),
                    {'feature_format': LaunchConfiguration('feature_format')}],
        remappings=[(t, LaunchConfiguration(t)) for t in topics]
        + [('/diagnostics', LaunchConfiguration('diagnostics'))],
        output='screen',
        emulate_tty=True,
    )
    return LaunchDescription(args + [node])
