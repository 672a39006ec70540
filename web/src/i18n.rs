//! Chinese or English, from the browser's Accept-Language: most members read Chinese first.
//! Labels are translated here; what the scheduler and the API say (a job's `why`, an error)
//! stays in the words the CLI prints, so a member can quote either to an admin.

/// A page's language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// English.
    En,
    /// Simplified Chinese.
    Zh,
}

impl Lang {
    /// The browser's first choice that we speak; English when it names neither.
    pub fn from_header(accept_language: Option<&str>) -> Lang {
        accept_language
            .map(accept_language::parse)
            .unwrap_or_default()
            .iter()
            .find_map(|tag| match tag.split('-').next() {
                Some(p) if p.eq_ignore_ascii_case("zh") => Some(Lang::Zh),
                Some(p) if p.eq_ignore_ascii_case("en") => Some(Lang::En),
                _ => None,
            })
            .unwrap_or(Lang::En)
    }

    /// The `lang` attribute.
    pub fn code(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Zh => "zh-CN",
        }
    }

    /// `en` in this language. Every label the pages use has a line here; a missing one shows
    /// in English, and the browser test reads the Chinese pages for the main ones.
    pub fn t(self, en: &'static str) -> &'static str {
        if self == Lang::En {
            return en;
        }
        match en {
            "Pool" => "资源池",
            "Queue" => "队列",
            "My jobs" => "我的作业",
            "Usage" => "用量",
            "Data" => "数据",
            "Snapshots" => "快照",
            "Alerts" => "告警",
            "Log out" => "退出",
            "Logged in as" => "当前用户",
            "admin" => "管理员",
            "Node" => "节点",
            "State" => "状态",
            "GPUs free" => "空闲 GPU",
            "free" => "空闲",
            "Job" => "作业",
            "User" => "用户",
            "Name" => "名称",
            "Partition" => "分区",
            "GPUs" => "GPU",
            "Waited" => "已等待",
            "Why it waits" => "等待原因",
            "Estimated start" => "预计开始",
            "unknown" => "未知",
            "No job waits." => "没有排队的作业。",
            "Running and waiting" => "运行中和排队中",
            "Recently finished" => "最近结束",
            "Cancel" => "取消",
            "Open notebook" => "打开 Notebook",
            "Output" => "输出",
            "Elapsed" => "已运行",
            "Exit" => "退出码",
            "Details" => "详情",
            "You have no jobs in the queue." => "队列中没有你的作业。",
            "Credits" => "积分",
            "Balance" => "余额",
            "Granted" => "发放",
            "Charged" => "扣除",
            "Rebated" => "返还",
            "Emergency tokens left" => "剩余紧急令牌",
            "Quota" => "配额",
            "Used" => "已用",
            "Limit" => "上限",
            "This month" => "本月",
            "Last month" => "上月",
            "GPU-hours" => "GPU 小时",
            "Jobs" => "作业数",
            "GPU utilisation" => "GPU 利用率",
            "My share of the pool by day" => "我每天占用资源池的比例",
            "Datasets" => "数据集",
            "Caches" => "缓存",
            "Size" => "大小",
            "Files" => "文件数",
            "Version" => "版本",
            "Versions" => "版本数",
            "Capacity" => "容量",
            "Staging" => "正在暂存",
            "Find a deleted file" => "找回已删除的文件",
            "Path" => "路径",
            "Find" => "查找",
            "Restore" => "恢复",
            "Snapshot" => "快照",
            "Time" => "时间",
            "Present" => "存在",
            "gone" => "已删除",
            "Restoring" => "正在恢复",
            "Done" => "完成",
            "Failed" => "失败",
            "Recent snapshots" => "最近的快照",
            "Firing" => "触发中",
            "Pending" => "待定",
            "Resolved" => "已解决",
            "No alert." => "没有告警。",
            "Alerts are for admins." => "只有管理员可以查看告警。",
            "Log in" => "登录",
            "Run `labpool web` on the pool and open the URL it prints." => {
                "在集群上运行 `labpool web`，然后打开它输出的链接。"
            }
            "Refused" => "被拒绝",
            "Back" => "返回",
            "Utilisation" => "利用率",
            "Temperature" => "温度",
            "Held by" => "使用者",
            "Submitted" => "提交时间",
            "Started" => "开始时间",
            "Ended" => "结束时间",
            "Working directory" => "工作目录",
            "Reason" => "原因",
            "No output yet, or the controller cannot read it here." => {
                "尚无输出，或控制节点无法读取该文件。"
            }
            "Previous" => "上一页",
            "Next" => "下一页",
            "Running" => "运行中",
            "waiting" => "排队中",
            "Events" => "事件",
            _ => en,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Lang;

    #[test]
    fn follows_the_browsers_first_language_we_speak() {
        assert_eq!(Lang::from_header(Some("zh-CN,zh;q=0.9,en;q=0.8")), Lang::Zh);
        assert_eq!(Lang::from_header(Some("en-US,en;q=0.9,zh;q=0.8")), Lang::En);
        assert_eq!(Lang::from_header(Some("fr-FR,zh-TW;q=0.5")), Lang::Zh);
        assert_eq!(Lang::from_header(Some("de")), Lang::En);
        assert_eq!(Lang::from_header(None), Lang::En);
        assert_eq!(Lang::Zh.t("Queue"), "队列");
    }
}
